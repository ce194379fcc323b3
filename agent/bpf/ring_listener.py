"""A thread that hands each record a BPF program writes on a ring to a callback, as soon as it is written."""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent.bpf.maps import BpfMap
from agent.bpf.ringbuf import RingBuffer
from agent.log import get_logger

POLL_MS = 200  # how long one wait lasts: a close() waits at most this long for the thread
log = get_logger("ring")


class RingListener:
    """Consumes ring *ring_map* on a thread of its own (the ring's one consumer) until :meth:`close`."""

    def __init__(self, name: str, ring_map: BpfMap, on_record: Callable[[bytes], None]) -> None:
        self._ring = RingBuffer(ring_map.fd, ring_map.max_entries, self._guarded(name, on_record))
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @staticmethod
    def _guarded(name: str, on_record: Callable[[bytes], None]) -> Callable[[bytes], None]:
        failed = threading.Event()

        def handle(record: bytes) -> None:
            try:
                on_record(record)
            except Exception as error:  # one record's failure never stops the listener; said once
                if not failed.is_set():
                    failed.set()
                    log.warning("ring_record_failed", ring=name, error=str(error))

        return handle

    def _run(self) -> None:
        while not self._closing.is_set():
            self._ring.poll(POLL_MS)

    def close(self) -> None:
        """Stop the thread, then unmap the ring (left mapped if the thread did not stop)."""
        self._closing.set()
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._ring.close()
