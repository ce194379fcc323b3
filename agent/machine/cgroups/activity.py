"""Whether a cgroup2 directory ran anything since its files were last read: its cpu.stat (CPU time, and on kernels
with the cpu controller, throttling) did not change by a byte. A collector whose files of an idle cgroup cannot
have moved much serves what it read last instead of reading them again, and reads them afresh at least every
REFRESH_SECONDS (spread by cgroup id, so the reads of a thousand idle cgroups do not all fall on one scrape)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from agent.machine.held_files import HeldFiles

REFRESH_SECONDS = 60.0  # an idle cgroup's files are read again at least this often (60 to 120 s, by id)


class ActivityGate:
    """Tells, per cgroup2 directory, whether its last reading may be served again (*read*: a reader of files by
    path, None for a file that cannot be read)."""

    def __init__(
        self,
        root: Path,
        read: Callable[[str], str | None],
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._root = str(root)
        self._read = read
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._last: dict[int, tuple[str, float]] = {}  # cgroup id -> (cpu.stat as read, read again after)

    def idle(self, cgroup_id: int, path: str) -> bool:
        """True when the directory's cpu.stat is as it was at the last reading, within its refresh time: serve
        that reading. False (read the files now) otherwise: the next call compares with this one's cpu.stat."""
        text = self._read(f"{self._root}{path}/cpu.stat")
        if text is None:
            self._last.pop(cgroup_id, None)
            return False
        now = self._clock()
        last = self._last.get(cgroup_id)
        if last is not None and last[0] == text and now < last[1]:
            return True
        self._last[cgroup_id] = (text, now + self._refresh_seconds * (1 + (cgroup_id % 16) / 16))
        return False

    def keep_only(self, cgroup_ids: set[int]) -> None:
        """Forget the cgroups not in *cgroup_ids* (gone)."""
        self._last = {key: value for key, value in self._last.items() if key in cgroup_ids}

    def __len__(self) -> int:
        return len(self._last)


class CpuStats:
    """Each cgroup2 directory's cpu.stat read once a scrape for every collector that asks (cgroup_cpu's CPU time, the
    gates of pressure and cgroup_memory), through descriptors held open. *round_of*: which scrape this is (None
    outside scrapes: every read is made afresh). At 1,000 workloads the three collectors read 3,000 cpu.stat files
    a scrape where 1,000 say the same."""

    def __init__(self, root: Path | None, limit: int, round_of: Callable[[], int | None]) -> None:
        self._files = HeldFiles(limit, [str(root)] if root is not None else [])
        self._round_of = round_of
        self._round: int | None = None
        self._texts: dict[str, str | None] = {}

    def read(self, path: str) -> str | None:
        """The text of the cpu.stat file at *path* as first read this scrape; None when it cannot be read."""
        now = self._round_of()
        if now is None:
            return self._files.read(path)
        if now != self._round:
            self._files.end_round()  # what the last scrape did not read is closed
            self._round, self._texts = now, {}
        if path not in self._texts:
            self._texts[path] = self._files.read(path)
        return self._texts[path]

    def close(self) -> None:
        """Close the files held open."""
        self._files.close()
