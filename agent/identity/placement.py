"""Kernel map keys -> where their counts belong (a cgroup path), in one of two key spaces.

- Cgroup keys (hosts with cgroup2, hybrid hosts included): a key is a cgroup2 id, placed by its path in the
  cgroup2 tree. Its entry is final once the cgroup is gone.
- Process keys (hosts without cgroup2, where every task sits in the cgroup2 root and cgroup ids tell nothing): a key
  is a process (tgid) while it lives; when it dies the kernel moves its entry to an exited key (bit 63 set, exit
  time in microseconds in bits 32-62, tgid in the low 32 bits). A process is placed by its line of
  /proc/PID/cgroup, read again at every scrape while it lives and whenever one of the programs announces a new key
  of it (a process often joins its cgroup just after it starts: runc's init, the test workloads), and remembered
  by (pid, start time), so a reused pid never inherits another process's place. An exited key is placed where
  the last process with its pid that started before the exit was last seen, and is final. A process gone before
  it could be read (it lived less time than the agent took to hear of it) is placed by what the kernel told:
  the place of the process that forked it, or where it moved to, since the programs also announce forks' parents
  and every move in the placing hierarchy with the new path.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Protocol

from agent.machine.cgroups.layout import CgroupLayout, parse_hierarchy_ids, parse_proc_cgroup
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.process_stat import read_process_stat
from agent.machine.procfs import SMALL_FILE, ProcFS, decode

EXITED_KEY_FLAG = 1 << 63
PF_EXITING = 0x4  # task flag: do_exit() has begun
PID_MASK = 0xFFFFFFFF
EXIT_SPAN = 1 << 31  # exit times are boot-clock microseconds modulo this: 36 minutes, far more than a scrape interval
SAME_EXIT_US = 100_000  # each program moves a dying process's entry within microseconds of the other
# The inode of the initial cgroup namespace (PROC_CGROUP_INIT_INO): only there are the paths the kernel announces
# for moves the same as the agent's /proc/PID/cgroup reads.
CGROUP_NS_INIT_INO = 0xEFFFFFFB
# Two announcements of a pid this close, the first of a process gone unread, are one process: a pid comes back
# only after pid_max others were made.
SAME_PROCESS_US = 10_000_000
# Two programs record one fork microseconds apart; a pid comes back far later than this.
SAME_FORK_US = 10_000
EARLY_MOVES_REMEMBERED = 1024  # moves heard before their process's announcement (another program's ring was first)


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
    place_hierarchy: int  # the hierarchy id whose moves the programs announce (-1: none)

    @property
    def healthy(self) -> bool:
        """Whether places can be found at all (a missing place then means 'gone', not 'cannot see')."""

    def place(self, keys: Iterable[int]) -> dict[int, Placement]:
        """The place of each key."""

    def forget(self, keys: Iterable[int]) -> None:
        """Drop what is cached for final keys whose kernel entries were deleted."""

    def sync(self) -> None:
        """Take in whatever the kernel announced and the agent has not handled yet (before a scrape's place)."""


class Announcer(Protocol):
    """A BPF program announcing new process keys on a ring (agent.bpf.probes.base.BpfProbe)."""

    def request_drain(self) -> None:
        """Ask for every pending announcement to be handled."""

    def wait_drained(self, timeout: float = 1.0) -> None:
        """Until they have been."""


class CgroupKeys:
    """Keys are cgroup2 ids."""

    per_process = False
    place_hierarchy = -1

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

    def sync(self) -> None:
        """Nothing is announced for cgroups."""


@dataclass
class _Seen:
    """One process seen with a pid."""

    start_us: int  # boot-clock start, from /proc (10 ms steps); or when announced, if never read
    path: str | None
    read_at: float  # agent clock, of the last /proc read
    read_by_scrape: bool = False  # that read was a scrape's (an announcement's may predate joining its cgroup)
    running: bool = True
    gone_at: float = 0.0  # agent clock, when it was found gone
    exited_us: int = -1  # boot-clock exit, from its first exited key
    # When it was surely running: its first announcement (precise: after its start, before its exit), else start.
    since_us: int = -1
    announced: bool = False
    forked_us: int = -1  # boot-clock fork, when an announcement carried it
    start_read: bool = True  # start_us is /proc's (a clock tick's start), not an announcement's time

    def __post_init__(self) -> None:
        if self.since_us < 0:
            self.since_us = self.start_us


class ProcessKeys:
    """Keys are processes (live: the tgid; exited: EXITED_KEY_FLAG | exit time << 32 | tgid).

    Every process seen with a pid is remembered with when it was surely running (its announcement); an exited
    key belongs to the last of them that was running before the exit. Nothing is consumed by placing, so each
    BPF collector places its own exited keys in any order; processes known gone are forgotten RETAIN_SECONDS later.
    """

    per_process = True

    REREAD_SECONDS = 1.0  # both BPF collectors place the same processes in one scrape: one cgroup read serves both
    RETAIN_SECONDS = 300.0  # longer than any scrape interval: every collector has placed its exited keys by then

    def __init__(
        self,
        layout: CgroupLayout,
        max_processes: int,
        proc: ProcFS | None = None,
        clock: Callable[[], float] = time.monotonic,
        boot_clock_us: Callable[[], int] = lambda: time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1000,
        initial_cgroup_namespace: bool | None = None,
    ) -> None:
        self._proc = proc or ProcFS()
        self._clock = clock
        self._boot_clock_us = boot_clock_us
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._tick_us = 1_000_000 // self._ticks
        # The workload hierarchy first (the one every collector and `diagnose` read a workload's directories in).
        self._hierarchies = layout.placing_order
        self.place_hierarchy = self._placing_hierarchy_id()
        if initial_cgroup_namespace is None:
            initial_cgroup_namespace = _in_initial_cgroup_namespace()
        self._moves_carry_paths = initial_cgroup_namespace
        self._early_moves: dict[int, str] = {}
        self._max_entries = 2 * max_processes  # the kernel map bounds keys; this bounds what is remembered
        self._seen: dict[int, list[_Seen]] = {}  # per pid, by start
        self._entries = 0
        self._announcers: list[Announcer] = []
        self._announced_since_sync = 0
        self._lock = threading.Lock()

    @property
    def healthy(self) -> bool:
        """True when /proc can be read."""
        return self._proc.path("self", "stat").exists()

    def announce(self, pid: int, boot_ns: int, parent: int = 0, forked_ns: int = 0) -> None:
        """The kernel saw a new process (at *boot_ns*), forked by *parent* at *forked_ns* (0: unknown): place it
        now, while it lives (listener thread)."""
        announced_us = boot_ns // 1000
        forked_us = forked_ns // 1000 if forked_ns else None
        with self._lock:
            self._announced_since_sync += 1
            moved_to = self._early_moves.pop(pid, None)
            alive = self._live(pid, reread=True)
            if alive is not None and forked_us is not None and not self._forked_as(alive, forked_us):
                alive = None  # a later process reused the pid while the announcement waited: the announced one is gone
            seen = alive or self._current(pid, announced_us, forked_us)
            if seen is None:  # born and gone before it could be read
                now = self._clock()
                seen = _Seen(announced_us, None, now, running=False, gone_at=now, announced=True, start_read=False)
                self._remember(pid, seen)
            if forked_us is not None and seen.forked_us < 0:
                seen.forked_us = forked_us
            if seen.path is None:  # gone, or exiting, when read: where the kernel said it moved, or was born
                seen.path = moved_to if moved_to is not None else self._place_of(parent)
            # An announcement tells when the process surely ran; one read after it died may come after its exit.
            if announced_us < seen.since_us or (alive is not None and not seen.announced):
                seen.since_us, seen.announced = announced_us, True
                self._seen[pid].sort(key=lambda s: s.since_us)

    def moved(self, pid: int, path: bytes | None, boot_ns: int = 0) -> None:
        """Process *pid* moved (at *boot_ns*; 0: unknown) to cgroup *path* of the placing hierarchy (None: too long
        for the announcement)."""
        with self._lock:
            place = decode(path) if path is not None and self._moves_carry_paths else None
            moved_us = boot_ns // 1000 if boot_ns else self._boot_clock_us()
            # The process that runs with the pid, if one does: perhaps a later one than the last announced.
            alive = self._live(pid, reread=True)
            if alive is not None and moved_us < alive.start_us:  # it began after the move: an earlier process moved
                seen = self._owner(pid, moved_us)
                if seen is not None and 0 <= seen.exited_us < moved_us:
                    seen = None
                alive = None
            else:
                seen = alive or self._current(pid, moved_us)
            if seen is None:  # not announced yet: its announcement will need this
                if place is not None:
                    if len(self._early_moves) >= EARLY_MOVES_REMEMBERED:
                        del self._early_moves[next(iter(self._early_moves))]
                    self._early_moves[pid] = place
            elif place is None:
                if alive is None:
                    seen.path = None  # moved, then gone before it could be read: where to is unknown
            else:
                seen.path, seen.read_by_scrape = place, False

    def place(self, keys: Iterable[int]) -> dict[int, Placement]:
        """Live keys by /proc; an exited key as the last process with its pid that was running before the exit."""
        placements = {}
        with self._lock:
            now_us = self._boot_clock_us()
            # Live keys first, then exits in time order: a process's own exit is placed before a later one's.
            for key in sorted(keys, key=lambda k: (bool(k & EXITED_KEY_FLAG), _full_exit_time(k, now_us))):
                pid = key & PID_MASK
                live = None if key & EXITED_KEY_FLAG else self._live(pid, reread=False)
                if live is not None:
                    placements[key] = Placement((pid, live.start_us), live.path, False)
                    continue
                # Exited; or a live key of a process that is gone (read mid-move, or not moved: the map was full).
                exited_us = _full_exit_time(key, now_us) if key & EXITED_KEY_FLAG else now_us
                seen = self._owner(pid, exited_us)
                if seen is not None and key & EXITED_KEY_FLAG:
                    if seen.exited_us < 0:
                        seen.exited_us = exited_us
                    elif exited_us > seen.exited_us + SAME_EXIT_US:
                        seen = None  # it exited earlier: this is a later process whose announcement was lost
                if seen is None:
                    placements[key] = Placement(key, None, True)
                    continue
                if seen.running:
                    seen.running, seen.gone_at = False, self._clock()
                placements[key] = Placement((pid, seen.start_us), seen.path, True)
            self._prune()
        return placements

    def forget(self, keys: Iterable[int]) -> None:
        """Nothing to do at once: other collectors may still place exited keys of the same processes."""

    def add_announcer(self, announcer: Announcer) -> None:
        """A program whose announcement ring :meth:`sync` drains."""
        self._announcers.append(announcer)

    def sync(self) -> None:
        """Handle every pending announcement of every program, so no exited key is placed before its process."""
        for announcer in self._announcers:
            announcer.request_drain()
        for announcer in self._announcers:
            announcer.wait_drained()
        with self._lock:
            self._announced_since_sync = 0

    def announced_since_sync(self) -> int:
        """Announcements (one per program per new process) since the last scrape placed the keys."""
        with self._lock:
            return self._announced_since_sync

    def __len__(self) -> int:
        with self._lock:
            return self._entries

    def _newest(self, pid: int) -> _Seen | None:
        history = self._seen.get(pid)
        return history[-1] if history else None

    def _current(self, pid: int, at_us: int, forked_us: int | None = None) -> _Seen | None:
        """The process with *pid* at *at_us* if it is already known: the newest seen (forked at *forked_us*, if
        given), if it still runs as far as the agent knows, or died unread shortly before and its exit has not
        been placed yet (each program announces a process once; a short-lived one may be gone when either
        announcement is read)."""
        history = self._seen.get(pid, ())
        if forked_us is not None:  # the fork time names the process, running or gone
            return next((s for s in reversed(history) if self._forked_as(s, forked_us)), None)
        seen = history[-1] if history else None
        if seen is None or seen.exited_us >= 0:
            return None
        if seen.running or (seen.announced and at_us - seen.since_us < SAME_PROCESS_US):
            return seen
        return None

    def _forked_as(self, seen: _Seen, forked_us: int) -> bool:
        """Whether *seen* can be the process forked at *forked_us* (unknown start: it can)."""
        if seen.forked_us >= 0:
            return abs(seen.forked_us - forked_us) <= SAME_FORK_US
        if not seen.start_read:
            return True
        # /proc's start is the clock tick it began in; the fork tracepoint fires just after the start is taken.
        return seen.start_us <= forked_us < seen.start_us + self._tick_us + SAME_FORK_US

    def _place_of(self, parent: int) -> str | None:
        """Where *parent* is now (a child's place until it moves), or was last seen; None if unknown."""
        if parent == 0:
            return None
        seen = self._live(parent, reread=True) or self._newest(parent)
        return None if seen is None else seen.path

    def _placing_hierarchy_id(self) -> int:
        """The id of the hierarchy processes are placed by (the one :meth:`_path` picks), -1 if unknown."""
        text = self._proc.read_text("self", "cgroup", SMALL_FILE)
        ids = parse_hierarchy_ids(text or "")
        return next((ids[name] for name in self._hierarchies if name in ids), next(iter(ids.values()), -1))

    def _owner(self, pid: int, exited_us: int) -> _Seen | None:
        """The last process seen with *pid* that was running before *exited_us*."""
        owner = None
        for seen in self._seen.get(pid, ()):
            if seen.since_us <= exited_us:
                owner = seen
        return owner

    def _live(self, pid: int, reread: bool) -> _Seen | None:
        """The running process with *pid*, its place read again (it may have moved); None if none runs."""
        now = self._clock()
        history = self._seen.get(pid, [])
        start_us = self._start_us(pid)
        if start_us is None:
            return None
        newest = next((seen for seen in reversed(history) if seen.running and seen.start_us == start_us), None)
        if newest is not None:
            fresh = newest.read_by_scrape and now - newest.read_at < self.REREAD_SECONDS
            if reread or not fresh:
                path = self._path(pid)
                if path is not None:  # None: it exited between the two reads; keep where it was
                    newest.path = path
                newest.read_at, newest.read_by_scrape = now, not reread
            return newest
        for older in history:  # a new process has this pid: the ones before it are gone
            if older.running:
                older.running, older.gone_at = False, now
        # After an earlier process with the pid, surely running only by the end of the tick it started in: an exit
        # earlier in that tick is the earlier process's.
        since_us = start_us + self._tick_us - 1 if history else start_us
        seen = _Seen(start_us, self._path(pid), now, read_by_scrape=not reread, since_us=since_us)
        self._remember(pid, seen)
        return seen

    def _remember(self, pid: int, seen: _Seen) -> None:
        if self._entries >= self._max_entries:
            self._prune(force=True)
            if self._entries >= self._max_entries:
                return
        history = self._seen.setdefault(pid, [])
        history.append(seen)
        history.sort(key=lambda s: s.since_us)
        self._entries += 1

    def _prune(self, force: bool = False) -> None:
        """Forget processes gone for RETAIN_SECONDS (when full: every gone one).

        A live process's key is placed at every scrape, so an entry not read for that long belongs to a process
        whose exit was never placed (its exited key was dropped from a full map): it is checked, and dropped too.
        """
        now = self._clock()
        cutoff = now - (0.0 if force else self.RETAIN_SECONDS)
        for pid in list(self._seen):
            history = self._seen[pid]
            for seen in history:
                if seen.running and seen.read_at < cutoff and self._start_us(pid) != seen.start_us:
                    seen.running, seen.gone_at = False, cutoff
            kept = [seen for seen in history if seen.running or seen.gone_at > cutoff]
            self._entries -= len(history) - len(kept)
            if kept:
                self._seen[pid] = kept
            else:
                del self._seen[pid]

    def _start_us(self, pid: int) -> int | None:
        stat = read_process_stat(self._proc, pid)
        return None if stat is None else stat.start_ticks * 1_000_000 // self._ticks

    def _exiting(self, pid: int) -> bool:
        """Whether the process is gone or has begun to exit (PF_EXITING in the flags, field 9 of stat)."""
        stat = read_process_stat(self._proc, pid)
        return stat is None or stat.flags & PF_EXITING != 0

    def _path(self, pid: int) -> str | None:
        """Its path in the placing hierarchy; None when gone, or exiting where /proc no longer tells."""
        text = self._proc.read_text(pid, "cgroup", SMALL_FILE)
        if text is None:
            return None
        paths = parse_proc_cgroup(text)
        hierarchy = next((name for name in self._hierarchies if name in paths), next(iter(paths), None))
        if hierarchy is None:
            return None
        # The kernel shows "/" for every v1 hierarchy of a task that has begun to exit; flags read after the
        # path tell whether that "/" was one.
        if paths[hierarchy] == "/" and hierarchy != "" and self._exiting(pid):
            return None
        return paths[hierarchy]


def _full_exit_time(key: int, now_us: int) -> int:
    """The boot-clock exit time of an exited key, from its 31 low bits of microseconds (the latest before now)."""
    low = (key >> 32) & (EXIT_SPAN - 1)
    return now_us - ((now_us - low) % EXIT_SPAN)


def _in_initial_cgroup_namespace() -> bool:
    try:
        return os.stat("/proc/self/ns/cgroup").st_ino == CGROUP_NS_INIT_INO
    except OSError:
        return False
