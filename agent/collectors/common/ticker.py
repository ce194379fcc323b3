"""A function run every few seconds on a thread of its own, between scrapes: the code-attribution collectors name
the addresses of processes while they live (an exited process's maps are gone), so they read their maps on a short
tick as well as at every scrape."""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent.log import get_logger

TICK_SECONDS = 1.0  # a process that lives at least this long gets its samples named (call sites: syscalls.py)

log = get_logger("ticker")


class Ticker:
    """Runs *work* every *seconds* until :meth:`close`; *work* runs under :attr:`lock`, which a scrape holds too."""

    def __init__(self, name: str, work: Callable[[], None], seconds: float = TICK_SECONDS) -> None:
        self.lock = threading.Lock()
        self._work = work
        self._seconds = seconds
        self._stop = threading.Event()
        self._failed = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-ticker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._seconds):
            try:
                with self.lock:
                    self._work()
            except Exception as error:  # a failed tick is retried at the next one and at the scrape
                if not self._failed:
                    self._failed = True
                    log.warning("tick_failed", error=str(error))

    def close(self) -> None:
        """Stop ticking (a tick in progress ends first)."""
        self._stop.set()
        self._thread.join(timeout=5)
