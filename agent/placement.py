"""Kernel map keys -> where their counts belong (a cgroup path), in one of two key spaces.

- Cgroup keys (hosts with cgroup2, hybrid hosts included): a key is a cgroup2 id, placed by its path in the
  cgroup2 tree. Its entry is final once the cgroup is gone.
- Process keys (hosts without cgroup2, where every task sits in the cgroup2 root and cgroup ids tell nothing): a key
  is a process (tgid) while it lives; when it dies the kernel moves its entry to an exited key (bit 63 set, exit
  time in microseconds in bits 32-62, tgid in the low 32 bits). A process is placed by its line of
  /proc/PID/cgroup, read again at every scrape while it lives and whenever one of the programs announces a new key
  of it (a process often joins its cgroup just after it starts: runc's init, the test workloads), and remembered
  by (pid, start time), so a reused pid never inherits another process's place. Exited keys are placed where
  their process was last seen (several processes that had one pid between two scrapes, in exit order), and are
  final.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.cgroups import CgroupLayout, CgroupPathResolver, parse_proc_cgroup

EXITED_KEY_FLAG = 1 << 63
PID_MASK = 0xFFFFFFFF
EXIT_SPAN = 1 << 31  # exit times are microseconds modulo this: 36 minutes, far longer than between two scrapes
# v1 hierarchies to place a process by, best first: systemd's own tree names services and scopes exactly.
V1_PREFERENCE = ("name=systemd", "cpu", "cpuacct", "memory", "pids")


@dataclass(frozen=True)
class Placement:
    """Where one kernel key's counts belong.

    ``source`` is what the totals table follows (the same for a process's live and exited keys), ``path`` the
    cgroup path (None: gone before it could be seen), and ``final`` says the key's values are its last: fold
    them in and delete the kernel entry.
    """

    source: Hashable
    path: str | None
    final: bool


class KeySpace(Protocol):
    """How the BPF collectors turn kernel keys into places."""

    per_process: bool

    @property
    def healthy(self) -> bool:
        """Whether places can be found at all (a missing place then means 'gone', not 'cannot see')."""

    def place(self, keys: Iterable[int]) -> dict[int, Placement]:
        """The place of each key."""

    def forget(self, keys: Iterable[int]) -> None:
        """Drop what is cached for final keys whose kernel entries were deleted."""


class CgroupKeys:
    """Keys are cgroup2 ids."""

    per_process = False

    def __init__(self, resolver: CgroupPathResolver) -> None:
        self._resolver = resolver

    @property
    def healthy(self) -> bool:
        """True when the cgroup2 tree is visible."""
        return self._resolver.healthy

    def place(self, keys: Iterable[int]) -> dict[int, Placement]:
        """Each id's cgroup2 path; final when the cgroup is gone."""
        paths = self._resolver.resolve(keys)
        healthy = self._resolver.healthy
        return {key: Placement(key, path, path is None and healthy) for key, path in paths.items()}

    def forget(self, keys: Iterable[int]) -> None:
        """Forget removed cgroups' ids."""
        self._resolver.forget(keys)


@dataclass
class _Seen:
    start: int | None  # start time in clock ticks after boot; None: gone before it was read
    path: str | None
    read_at: float = 0.0


class ProcessKeys:
    """Keys are processes (live: the tgid; exited: EXITED_KEY_FLAG | exit time << 32 | tgid)."""

    per_process = True

    REREAD_SECONDS = 1.0  # both BPF collectors place the same processes in one scrape: read each cgroup file once

    def __init__(
        self,
        layout: CgroupLayout,
        max_processes: int,
        proc: Path = Path("/proc"),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._proc = proc
        self._clock = clock
        self._hierarchies = ("",) if layout.unified is not None else (*V1_PREFERENCE, *sorted(layout.v1))
        self._max_processes = max_processes
        # Per pid, the processes seen with it, oldest first: an exited key is the oldest one's.
        self._seen: dict[int, collections.deque[_Seen]] = {}
        self._lock = threading.Lock()

    @property
    def healthy(self) -> bool:
        """True when /proc can be read."""
        return (self._proc / "self" / "stat").exists()

    def announce(self, pid: int) -> None:
        """A new process appeared in the kernel's maps: place it now, while it lives (listener thread)."""
        with self._lock:
            self._live(pid, announced=True)

    def place(self, keys: Iterable[int]) -> dict[int, Placement]:
        """Live keys by /proc; exited keys, in exit order, as the processes seen with their pid, oldest first."""
        placements = {}
        exited: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)  # pid -> (exit time, key)
        stale: dict[int, int] = {}  # pid -> live key of a process that is gone
        with self._lock:
            for key in keys:
                pid = key & PID_MASK
                if key & EXITED_KEY_FLAG:
                    exited[pid].append((_exit_time(key), key))
                    continue
                live = self._live(pid, announced=False)
                if live is not None:
                    placements[key] = Placement((pid, live.start), live.path, False)
                else:
                    stale[pid] = key
            for pid, dead in exited.items():
                history = list(self._seen.get(pid, ()))
                for index, key in enumerate(_in_exit_order(dead)):
                    seen = history[index] if index < len(history) else None
                    placements[key] = Placement(_source(pid, seen, key), seen.path if seen else None, True)
            for pid, key in stale.items():
                if pid in exited:  # read while the kernel moved it: the same process as its newest exited key
                    placements[key] = placements[_in_exit_order(exited[pid])[-1]]
                else:  # its entry could not be moved (the map was full)
                    seen = self._oldest(pid)
                    placements[key] = Placement(_source(pid, seen, key), seen.path if seen else None, True)
        return placements

    def forget(self, keys: Iterable[int]) -> None:
        """The final keys' processes were the oldest seen with their pids: drop one per process."""
        processes: dict[int, int] = collections.Counter()
        stale = set()
        for key in keys:
            if key & EXITED_KEY_FLAG:
                processes[key & PID_MASK] += 1
            else:
                stale.add(key & PID_MASK)
        for pid in stale:
            processes[pid] = processes[pid] or 1  # a live key read mid-move is the same process as its exited key
        with self._lock:
            for pid, count in processes.items():
                history = self._seen.get(pid)
                for _ in range(min(count, len(history or ()))):
                    assert history is not None
                    history.popleft()
                if not history:
                    self._seen.pop(pid, None)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(history) for history in self._seen.values())

    def _oldest(self, pid: int) -> _Seen | None:
        history = self._seen.get(pid)
        return history[0] if history else None

    def _live(self, pid: int, announced: bool) -> _Seen | None:
        """The running process with *pid*, its place read again (it may have moved); None if it is not running."""
        now = self._clock()
        history = self._seen.setdefault(pid, collections.deque())
        newest = history[-1] if history else None
        start = self._start_time(pid)
        fresh = newest is not None and now - newest.read_at < self.REREAD_SECONDS
        if start is not None and newest is not None and newest.start == start and fresh and not announced:
            return newest
        if start is None:
            if announced and (newest is None or newest.start is not None):
                history.append(_Seen(None, None, now))  # born and gone before it could be read: keep its turn
            elif not history:
                del self._seen[pid]
            return None
        path = self._path(pid)
        if newest is not None and newest.start == start:
            if path is not None:  # None: it exited between the two reads; keep where it was
                newest.path = path
            newest.read_at = now
            return newest
        seen = _Seen(start, path, now)
        if len(self._seen) <= 2 * self._max_processes:  # the kernel map bounds keys; so does this cache
            history.append(seen)
        return seen

    def _start_time(self, pid: int) -> int | None:
        try:
            stat = (self._proc / str(pid) / "stat").read_text()
        except OSError:
            return None
        # The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        return int(fields[19]) if len(fields) > 19 else None

    def _path(self, pid: int) -> str | None:
        try:
            paths = parse_proc_cgroup((self._proc / str(pid) / "cgroup").read_text())
        except OSError:
            return None
        for hierarchy in self._hierarchies:
            if hierarchy in paths:
                return paths[hierarchy]
        return next(iter(paths.values()), None)


def _exit_time(key: int) -> int:
    return (key >> 32) & (EXIT_SPAN - 1)


def _in_exit_order(dead: list[tuple[int, int]]) -> list[int]:
    """Keys of one pid's dead processes by exit time, minding that the 31-bit microsecond clock wraps."""
    times = [time for time, _ in dead]
    wrapped = max(times) - min(times) > EXIT_SPAN // 2
    return [
        key for _, key in sorted(dead, key=lambda d: d[0] + (EXIT_SPAN if wrapped and d[0] < EXIT_SPAN // 2 else 0))
    ]


def _source(pid: int, seen: _Seen | None, key: int) -> Hashable:
    return (pid, seen.start) if seen is not None and seen.start is not None else key
