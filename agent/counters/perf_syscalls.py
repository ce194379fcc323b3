"""Exact sched_yield and futex-by-operation counts per cgroup from counting perf events (no BPF).

One counter per (CPU, cgroup, event): sys_enter_sched_yield, sys_enter_futex once per operation class (a
tracepoint filter listing the class's commands with every flag combination), and the futex2 syscalls where the
kernel has them. A cgroup's counters on one CPU form a group, read in one system call at scrape time. New cgroups
get counters at the scrape that first sees them (or as they are made: agent.counters.cgroup_watch); what they
counted before is counted in their nearest counted ancestor (perf cgroup events count the cgroups below theirs).
A removed cgroup's counters are read once more, then closed.

Nothing can count a cgroup's calls from before its counters opened in that cgroup: when its tasks ran first (a
cgroup made just before its workload started, faster than the watcher opened its counters on every CPU), or while
the kernel refuses its counters, those calls are in its nearest counted ancestor. A cgroup in which a task is, or
has run (cgroup2's cpu.stat), once all its counters are open, and the ancestor that may hold its calls, are
reported as not exact (PerfSnapshot.inexact), so that their series say so. A refusal with ENOENT
(the kernel has no perf_event state for a directory that exists: one being made or removed) is tried again at the
next read; other refusals stand while the cgroup exists.

File descriptors are bounded: CPUs x events per cgroup, for at most --max-cgroups cgroups and at most what
RLIMIT_NOFILE leaves (raised to its hard limit at start); cgroups left without counters are counted.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.bpf.probes.syscalls import FUTEX_OPS
from agent.counters import perf_events
from agent.counters.cgroup_tree import parent_path
from agent.log import get_logger
from agent.machine import syscall_families
from agent.machine.cgroups.files import cgroup_directory, parse_flat_keyed, read_cgroup_file
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.cpus import online_cpus
from agent.machine.fdlimit import raise_fd_limit

FUTEX_FLAG_COMBINATIONS = (0, 128, 256, 384)  # none, FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME, both
# futex(2) commands by operation class, as bpf/syscalls.bpf.c classifies them.
FUTEX_COMMANDS = {
    "wait": (0, 9, 11),  # FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI
    "wake": (1, 5, 10),  # FUTEX_WAKE, FUTEX_WAKE_OP, FUTEX_WAKE_BITSET
    "requeue": (3, 4, 12),  # FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_CMP_REQUEUE_PI
    "lock_pi": (6, 7, 8, 13),  # FUTEX_LOCK_PI, FUTEX_UNLOCK_PI, FUTEX_TRYLOCK_PI, FUTEX_LOCK_PI2
}
VECTOR_WIDTH = 1 + len(FUTEX_OPS)  # yields, then futex calls by FUTEX_OPS
# System-call families counted with families=True, each by the tracepoints of all of its calls, in slots after
# the futex ones; with yields and futex calls these are exact. The other families (file, network, other) would
# take a counter per syscall per cgroup per CPU (~200 tracepoints): not counted in perf mode.
COUNTED_FAMILIES = (
    syscall_families.CLOCK,
    syscall_families.SLEEP,
    syscall_families.POLL,
    syscall_families.MEMORY,
    syscall_families.PROCESS,
)
FAMILY_SLOTS = {family: VECTOR_WIDTH + index for index, family in enumerate(COUNTED_FAMILIES)}
FAMILIES_VECTOR_WIDTH = VECTOR_WIDTH + len(COUNTED_FAMILIES)
RESERVED_FDS = 1024  # left for the web server, /proc and cgroup files, runtime sockets
# Each counter holds about 2 KB of kernel memory (perf_event slab, file, filter; measured here): at most ~64 MB.
MAX_COUNTERS = 32768
log = get_logger("perf_syscalls")


@dataclass(frozen=True)
class CountedEvent:
    """One tracepoint counted per cgroup and CPU, into one slot of the cgroup's vector."""

    slot: int
    event: str  # in the syscalls category
    event_filter: str | None = None


def _commands(ops: Iterable[int]) -> tuple[int, ...]:
    return tuple(command | flags for command in ops for flags in FUTEX_FLAG_COMBINATIONS)


def counted_events(tracefs: Path, families: bool = False) -> list[tuple[CountedEvent, int]]:
    """(event, tracepoint id) of every event counted here; futex2 events only where the kernel has them; with
    *families*, the calls of COUNTED_FAMILIES too (those this kernel has: fork and vfork, say, are x86_64's only)."""
    slot = {op: 1 + index for index, op in enumerate(FUTEX_OPS)}
    known = _commands(command for commands in FUTEX_COMMANDS.values() for command in commands)
    wanted = [
        CountedEvent(0, "sys_enter_sched_yield"),
        *(
            CountedEvent(slot[op], "sys_enter_futex", perf_events.equality_filter("op", _commands(commands)))
            for op, commands in FUTEX_COMMANDS.items()
        ),
        CountedEvent(slot["other"], "sys_enter_futex", perf_events.inequality_filter("op", known)),
        CountedEvent(slot["waitv"], "sys_enter_futex_waitv"),
        CountedEvent(slot["wait"], "sys_enter_futex_wait"),
        CountedEvent(slot["wake"], "sys_enter_futex_wake"),
        CountedEvent(slot["requeue"], "sys_enter_futex_requeue"),
    ]
    if families:
        wanted += [
            CountedEvent(FAMILY_SLOTS[family], f"sys_enter_{name}")
            for family in COUNTED_FAMILIES
            for name in syscall_families.FAMILY_SYSCALLS[family]
        ]
    found = []
    for event in wanted:
        tracepoint = perf_events.tracepoint_id(tracefs, "syscalls", event.event)
        if tracepoint is not None:
            found.append((event, tracepoint))
    return found


REQUIRED_EVENTS = ("sys_enter_sched_yield", "sys_enter_futex")


@dataclass
class _Cgroup:
    path: str
    fds: list[list[int]]  # per CPU, one group: per counted event, the leader first
    exported: list[int]  # never goes backwards
    removed_below: list[int]
    exact: bool = True  # False: some of its calls are in an ancestor's counts, or some of a descendant's in its own


@dataclass(frozen=True)
class CounterHealth:
    """Counters open, cgroups that exist without counters, and counters the kernel refused by errno name."""

    counters_open: int
    cgroups_uncounted: int
    open_failures: dict[str, int]


@dataclass(frozen=True)
class PerfSnapshot:
    """Per cgroup id: (path, counts of tasks in that very cgroup: yields, futex calls by FUTEX_OPS, and calls of each
    of COUNTED_FAMILIES when counted); and the ids whose counts are not exactly their own tasks' (some of its calls
    were counted in an ancestor before its counters opened, or it holds such calls of a descendant)."""

    cgroups: dict[int, tuple[str, list[int]]]
    health: CounterHealth
    inexact: frozenset[int] = frozenset()


class PerfSyscallCounters:
    """Counting perf events per cgroup of the *tree*, opened and closed as cgroups come and go. Each cgroup's
    vector: yields, futex calls by FUTEX_OPS, and with *families* the calls of each of COUNTED_FAMILIES."""

    def __init__(self, tree: Path, tracefs: Path, hierarchical: bool, max_cgroups: int, families: bool = False) -> None:
        self._resolver = CgroupPathResolver(tree)
        self._events = counted_events(tracefs, families)
        self.width = FAMILIES_VECTOR_WIDTH if families else VECTOR_WIDTH
        missing = set(REQUIRED_EVENTS) - {event.event for event, _ in self._events}
        if missing:
            raise perf_events.PerfEventError(errno.ENOENT, f"kernel lacks tracepoints {', '.join(sorted(missing))}")
        self._hierarchical = hierarchical
        self._cpus = online_cpus()
        per_cgroup = len(self._events) * len(self._cpus)
        budget = min(MAX_COUNTERS, raise_fd_limit() - RESERVED_FDS)
        self.max_cgroups = max(1, min(max_cgroups, budget // per_cgroup))
        self._counted: dict[int, _Cgroup] = {}
        self._refused: set[int] = set()  # cgroups whose counters the kernel refused: not retried
        self._retrying: set[int] = set()  # refused with ENOENT: tried again at each read (logged once)
        self._failures: dict[str, int] = {}
        self._uncounted = 0
        self._began = False  # the first read opened the counters of every cgroup there was
        self._lock = threading.Lock()  # the scrape and the cgroup watcher both open counters

    @property
    def counters_per_cgroup(self) -> int:
        """File descriptors each counted cgroup holds."""
        return len(self._events) * len(self._cpus)

    def read(self) -> PerfSnapshot:
        """Open counters for new cgroups, read every counter, close those of removed cgroups."""
        with self._lock:
            return self._read()

    def open_path(self, path: str) -> None:
        """Open the counters of the cgroup at *path* (relative to the tree) now, if it has none and fits the bound.

        Called as a cgroup is made (agent.counters.cgroup_watch), so that its tasks are counted from their start.
        """
        root = self._resolver.root
        with self._lock:
            try:
                cgroup_id = os.stat(f"{root}{path}").st_ino
            except OSError:
                return
            if cgroup_id in self._counted or cgroup_id in self._refused or len(self._counted) >= self.max_cgroups:
                return
            self._open_one(cgroup_id, path)

    def _open_one(self, cgroup_id: int, path: str) -> None:
        """Open one cgroup's counters; mark it and its nearest counted ancestor inexact when a task of it had run
        before the last of them opened (its calls until each CPU's opened are in that ancestor's counts), and that
        ancestor while the kernel refuses them and a task is in it."""
        fds, error = self._open_cgroup(path)
        # Read once every counter is open: a cgroup that has run nothing by then is counted whole, from its start.
        # One whose task ran while they opened one CPU after the other may be whole too: it is said to be not exact.
        ran = self._began and self._ran(path)
        if fds is not None:
            self._retrying.discard(cgroup_id)
            self._counted[cgroup_id] = _Cgroup(path, fds, [0] * self.width, [0] * self.width, exact=not ran)
        elif error == errno.ENOENT:
            self._retrying.add(cgroup_id)
        else:
            self._refused.add(cgroup_id)
        if ran:
            ancestor = self._counted_ancestor(path, {cgroup.path: key for key, cgroup in self._counted.items()})
            if ancestor is not None:
                self._counted[ancestor].exact = False

    def _mark_holders(self, paths: dict[int, str]) -> None:
        """Mark inexact the nearest counted ancestor of each cgroup left without counters (past the bound, or
        refused) in which a task is or has run: its calls are counted there. An ancestor marked already is not
        checked again."""
        uncounted = [path for cgroup_id, path in paths.items() if cgroup_id not in self._counted]
        if not uncounted or not self._began:
            return
        by_path = {cgroup.path: key for key, cgroup in self._counted.items()}
        for path in uncounted:
            ancestor = self._counted_ancestor(path, by_path)
            if ancestor is not None and self._counted[ancestor].exact and self._ran(path):
                self._counted[ancestor].exact = False

    def _ran(self, path: str) -> bool:
        """Whether a task is in the cgroup, or (cgroup2) has run in it: its cpu.stat's usage_usec above 0."""
        directory = cgroup_directory(self._resolver.root or "", path)
        if (read_cgroup_file(f"{directory}/cgroup.procs") or "").strip():
            return True
        return parse_flat_keyed(read_cgroup_file(f"{directory}/cpu.stat") or "").get("usage_usec", 0) > 0

    def _read(self) -> PerfSnapshot:
        paths = self._resolver.snapshot()
        gone = [cgroup_id for cgroup_id in self._counted if cgroup_id not in paths]
        self._refused &= set(paths)
        self._retrying &= set(paths)
        self._open_new(paths)
        own = {cgroup_id: self._own(cgroup) for cgroup_id, cgroup in sorted(self._counted.items(), key=_by_path)}
        # A path removed and made again has a new id: the live one wins the path.
        by_path = {self._counted[cgroup_id].path: cgroup_id for cgroup_id in [*gone, *set(self._counted) - set(gone)]}
        if self._hierarchical:
            # Deepest first: a removed cgroup's children were removed before it, or in the same interval.
            for cgroup_id in sorted(gone, key=lambda key: -self._counted[key].path.count("/")):
                ancestor = self._counted_ancestor(self._counted[cgroup_id].path, by_path)
                if ancestor is not None:
                    below = self._counted[ancestor].removed_below
                    below[:] = [a + b for a, b in zip(below, own[cgroup_id], strict=True)]
        exclusive = dict(own)
        if self._hierarchical:
            for cgroup_id, cgroup in self._counted.items():
                exclusive[cgroup_id] = [a - b for a, b in zip(exclusive[cgroup_id], cgroup.removed_below, strict=True)]
            for cgroup_id in set(by_path.values()) - set(gone):  # the removed ones are in removed_below
                ancestor = self._counted_ancestor(self._counted[cgroup_id].path, by_path)
                if ancestor is not None:
                    exclusive[ancestor] = [a - b for a, b in zip(exclusive[ancestor], own[cgroup_id], strict=True)]
        counts: dict[int, tuple[str, list[int]]] = {}
        for cgroup_id, cgroup in self._counted.items():
            # Parents are read before their children: a parent's own count can only be short, never long.
            cgroup.exported = [max(a, b) for a, b in zip(cgroup.exported, exclusive[cgroup_id], strict=True)]
            counts[cgroup_id] = (cgroup.path, list(cgroup.exported))
        self._mark_holders(paths)
        inexact = frozenset(cgroup_id for cgroup_id, cgroup in self._counted.items() if not cgroup.exact)
        for cgroup_id in gone:
            self._close(self._counted.pop(cgroup_id))
        self._uncounted = sum(1 for cgroup_id in paths if cgroup_id not in self._counted)
        self._began = True
        health = CounterHealth(len(self._counted) * self.counters_per_cgroup, self._uncounted, dict(self._failures))
        return PerfSnapshot(counts, health, inexact)

    def close(self) -> None:
        """Close every counter."""
        with self._lock:
            for cgroup in self._counted.values():
                self._close(cgroup)
            self._counted.clear()

    def _open_new(self, paths: dict[int, str]) -> None:
        """Counters for cgroups not counted yet within the bound: shallowest first; past the bound, the cgroups
        with processes in them first (an empty one's future calls are counted in its ancestor meanwhile)."""
        new = [(path, cgroup_id) for cgroup_id, path in paths.items() if cgroup_id not in self._counted]
        new = [(path, cgroup_id) for path, cgroup_id in new if cgroup_id not in self._refused]
        room = self.max_cgroups - len(self._counted)
        if room <= 0 or not new:
            return
        order = sorted(new, key=lambda item: (item[0].count("/"), item[0]))
        if len(new) > room:
            order.sort(key=lambda item: not self._populated(item[0]))  # stable: depth order within each
        for path, cgroup_id in order[:room]:
            self._open_one(cgroup_id, path)

    def _populated(self, path: str) -> bool:
        try:
            with open(f"{self._resolver.root}{path}/cgroup.procs", "rb") as procs:
                return bool(procs.read(16).strip())
        except OSError:
            return False

    def _open_cgroup(self, path: str) -> tuple[list[list[int]] | None, int | None]:
        """The cgroup's counters, per CPU a group; or None and the errno of the refusal (0: removed since the walk)."""
        root = self._resolver.root
        assert root is not None
        try:
            directory = os.open(f"{root}{path}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            if error.errno != errno.ENOENT:  # removed since the walk: nothing to count
                self._failed(path, error)
                return None, error.errno
            return None, 0
        opened: list[list[int]] = []
        try:
            for cpu in self._cpus:
                opened.append([])
                for event, tracepoint in self._events:
                    leader = opened[-1][0] if opened[-1] else -1
                    opened[-1].append(
                        perf_events.open_cgroup_counter(tracepoint, directory, cpu, event.event_filter, leader)
                    )
        except perf_events.PerfEventError as error:
            self._failed(path, error)
            for fds in opened:
                for fd in fds:
                    os.close(fd)
            return None, error.errno
        finally:
            os.close(directory)
        return opened, None

    def _failed(self, path: str, error: OSError) -> None:
        """Count and say a cgroup's refusal once (an ENOENT one is tried again at each read)."""
        if error.errno == errno.ENOENT and _inode(f"{self._resolver.root}{path}") in self._retrying:
            return
        name = errno.errorcode.get(error.errno or 0, str(error.errno))
        self._failures[name] = self._failures.get(name, 0) + 1
        ancestor = self._counted_ancestor(path, {cgroup.path: key for key, cgroup in self._counted.items()})
        where = "nowhere" if ancestor is None else self._counted[ancestor].path
        log.warning(
            "perf_counters_refused",
            cgroup=path,
            error=str(error),
            consequence=f"its calls are counted in {where} (marked not exact) while refused",
            retry="at each scrape" if error.errno == errno.ENOENT else "no",
        )

    def _own(self, cgroup: _Cgroup) -> list[int]:
        """The cgroup's counts, its descendants' included where counting is hierarchical."""
        vector = [0] * self.width
        for group in cgroup.fds:
            counts = perf_events.read_group(group[0], len(self._events))
            for (event, _tracepoint), count in zip(self._events, counts, strict=True):
                vector[event.slot] += count
        return vector

    def _counted_ancestor(self, path: str, by_path: dict[str, int]) -> int | None:
        parent = parent_path(path)
        while parent is not None:
            if parent in by_path:
                return by_path[parent]
            parent = parent_path(parent)
        return None

    @staticmethod
    def _close(cgroup: _Cgroup) -> None:
        for fds in cgroup.fds:
            for fd in fds:
                os.close(fd)


def _by_path(item: tuple[int, _Cgroup]) -> str:
    return item[1].path


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
