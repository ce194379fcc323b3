"""The cgroup_memory collector: per workload, the memory limit that applies, the times it was hit (memory.events,
or v1's failcnt and oom_kill), and its page faults and refaults, from cgroup files (agent/machine/cgroups/memory.py).

The workloads are the directories of the workload hierarchy (agent.machine.cgroups.layout: cgroup2, or on hosts
without it systemd's v1 tree, else the memory hierarchy's). Where the memory controller is enabled in cgroup2 each
directory's own files are read; otherwise (hybrid hosts, v1 hosts) each directory is matched to its v1 memory
cgroup through the same relative path or, failing that, through /proc/PID/cgroup of one of its processes. On a host
without cgroup2 a memory cgroup is a workload's as agent.machine.cgroups.v1_owner says (its mirror's, or one
elsewhere of one workload only). The counters include a cgroup's descendants, so of one workload's cgroups only the
outermost are read (as for CPU used and pressure), and the root cgroup, whose totals are the machine's, none. Only
what a workload has is exported: a limit when one applies, an event once it happened. The files are read through
descriptors held open, at a scrape when the cgroup's cpu.stat moved since they were last read
(agent/machine/cgroups/activity.py), and at least every 60-120 s: a cgroup that ran nothing in between (no fault, no
allocation, no reclaim of its own) serves its last reading; a limit changed, or reclaim by others' pressure, on an
idle cgroup shows within two minutes (docs/benchmarks.md: the gate saved about 30 ms a scrape at 1,000 idle
workloads).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.core import Metric

from agent import metrics
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.collectors.common.cgroup_tree import controller_availability, workload_tree
from agent.exposition.family import BlockCache
from agent.identity.workload import workload_for_cgroup
from agent.machine.cgroups.activity import ActivityGate
from agent.machine.cgroups.files import first_process, outermost, v2_controllers
from agent.machine.cgroups.layout import parse_proc_cgroup
from agent.machine.cgroups.memory import EVENTS, MemoryState, read_memory_v1, read_memory_v2
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.cgroups.v1_owner import Claims, may_own
from agent.machine.facts import MachineFacts
from agent.machine.held_files import HeldFiles
from agent.machine.procfs import SMALL_FILE, ProcFS
from agent.model import CounterTable, Labels

NAME = "cgroup_memory"
FILES_PER_CGROUP = 6  # memory.stat, events or failcnt and oom_control, the limits of a cgroup2 directory, cpu.stat
# The counter vector of one cgroup: events by EVENTS, then page faults (minor, major), then refaults.
_WIDTH = len(EVENTS) + 3
COUNTS = ("minor", "major", "refaults")  # the counters after the events, by the name of what gives them


def check(facts: MachineFacts) -> Availability:
    """Needs a workload tree (cgroup2, or on hosts without it the v1 workload hierarchy) and a memory controller in
    some hierarchy."""
    return controller_availability(facts, "memory")


class CgroupMemoryCollector:
    """Reads the memory files of every workload's outermost cgroups, once per scrape."""

    name = NAME

    def __init__(self, context: CollectorContext) -> None:
        root = workload_tree(context.facts)
        assert root is not None
        self._root: Path = root
        self._without_cgroup2 = context.facts.cgroup_root is None
        self._resolver = CgroupPathResolver(root) if self._without_cgroup2 else context.resolver
        self._identities = context.identities
        self._v1_root = context.facts.cgroups.v1.get("memory")
        self._v2_memory = "memory" in v2_controllers(self._root)
        self._max_cgroups = context.settings.max_cgroups
        self._proc = ProcFS()
        self._v1_paths: dict[int, str] = {}
        self._table = CounterTable(width=_WIDTH, grace_seconds=context.settings.series_grace_seconds)
        self._known: set[str] = set()  # of COUNTS, those this kernel's files give (a missing one has no series)
        roots = [str(path) for path in (self._root, self._v1_root) if path is not None]
        self._files = HeldFiles(FILES_PER_CGROUP * context.settings.max_cgroups, roots)
        read_stat = context.cpu_stats.read if context.cpu_stats is not None else self._files.read
        self._gate = ActivityGate(self._root, read_stat)
        self._last: dict[int, tuple[Hashable, MemoryState] | None] = {}  # each cgroup's reading when last read
        self._limit_blocks = BlockCache(_limit_rows)
        self._blocks = BlockCache(_count_rows)

    def collect(self) -> list[Metric]:
        """Read each workload's memory files and build the families."""
        paths = self._resolver.snapshot(this_round=True)
        by_labels: dict[Labels, list[tuple[str, int]]] = {}
        for cgroup_id, path in paths.items():
            if path != "/":
                by_labels.setdefault(workload_for_cgroup(path, self._identities).labels(), []).append((path, cgroup_id))
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        limits: dict[Labels, int] = {}
        claims = Claims()
        for labels, cgroups in by_labels.items():
            for path, cgroup_id in outermost(cgroups):
                if len(live) >= self._max_cgroups:
                    break
                found = self._read_unless_idle(cgroup_id, path)
                if found is None:
                    continue
                source, state = found
                if self._without_cgroup2:
                    claims.add(_v1_path(source), labels)
                if source not in live:  # several cgroup2 directories can share one v1 memory cgroup
                    live[source] = (labels, _vector(state))
                    self._known |= _known(state)
                if state.limit_bytes is not None:
                    limits[labels] = min(limits.get(labels, state.limit_bytes), state.limit_bytes)
        self._v1_paths = {key: value for key, value in self._v1_paths.items() if key in paths}
        self._last = {key: value for key, value in self._last.items() if key in paths}
        self._gate.keep_only(set(paths))
        if self._without_cgroup2:  # a memory cgroup elsewhere that several workloads are in is none of theirs
            live = {source: row for source, row in live.items() if claims.sole(_v1_path(source))}
        self._table.update(live)
        self._files.end_round()
        return self._families(limits)

    def close(self) -> None:
        """Close the files held open."""
        self._files.close()

    def _read_unless_idle(self, cgroup_id: int, path: str) -> tuple[Hashable, MemoryState] | None:
        """The cgroup's reading as last read while it ran nothing since (within the gate's refresh), else read now."""
        if self._gate.idle(cgroup_id, path) and cgroup_id in self._last:
            return self._last[cgroup_id]
        found = self._last[cgroup_id] = self._read(cgroup_id, path)
        return found

    def _read(self, cgroup_id: int, path: str) -> tuple[Hashable, MemoryState] | None:
        if self._v2_memory:
            state = read_memory_v2(self._root, path, self._files.read)
            return None if state is None else (("v2", cgroup_id), state)
        if self._v1_root is None:
            return None
        v1_path = self._v1_paths.get(cgroup_id) or self._find_v1_path(cgroup_id, path)
        if v1_path == "/":
            return None  # in no v1 memory cgroup of its own: the root's counters are the machine's
        if self._without_cgroup2 and not may_own(self._root, path, v1_path):
            return None  # its slice's (or another workload's) memory cgroup: counted there
        state = read_memory_v1(self._v1_root, v1_path, self._files.read)
        return None if state is None else (("v1", v1_path), state)

    def _find_v1_path(self, cgroup_id: int, path: str) -> str:
        """The v1 memory cgroup of a workload directory (runtimes usually mirror the path in every hierarchy); "/"
        when it cannot be told yet (no process in it, or the process gone), which is asked again next scrape."""
        assert self._v1_root is not None
        if (self._v1_root / path.lstrip("/")).is_dir():
            found = path
        else:
            pid = first_process(self._root, path)
            text = None if pid is None else self._proc.read_text(pid, "cgroup", SMALL_FILE)
            if text is None:
                return "/"
            found = parse_proc_cgroup(text).get("memory", "/")
        self._v1_paths[cgroup_id] = found
        return found

    def _families(self, limits: dict[Labels, int]) -> list[Metric]:
        limit = metrics.MEMORY_LIMIT_BYTES.family()
        events = metrics.MEMORY_EVENTS.family()
        faults = metrics.PAGE_FAULTS.family()
        refaults = metrics.MEMORY_REFAULTS.family()
        self._limit_blocks.add_to([limit], limits.items())
        known = frozenset(self._known)
        self._blocks.add_to(
            [events, faults, refaults], ((labels, (totals, known)) for labels, totals in self._table.rows())
        )
        tracked = metrics.TRACKED_SERIES.family()
        tracked.add_metric([NAME], len(self._table))
        return [limit, events, faults, refaults, tracked]


def _limit_rows(labels: Labels, value: int) -> tuple[list[tuple[Labels, int]]]:
    """A workload's one row of the limit family."""
    return ([(labels, value)],)


def _count_rows(labels: Labels, counted: tuple[tuple[int, ...], frozenset[str]]) -> tuple[list[Any], ...]:
    """A workload's rows of the events, faults and refaults families, from its totals and the counts this kernel
    gives (a block made once while they stand: the writer and the standing evaluation reuse it)."""
    totals, known = counted
    events = [((*labels, event), totals[index]) for index, event in enumerate(EVENTS) if totals[index] > 0]
    minor, major, refaulted = totals[len(EVENTS) :]
    faults = [((*labels, kind), count) for kind, count in (("minor", minor), ("major", major)) if kind in known]
    refaults = [(labels, refaulted)] if "refaults" in known else []
    return events, faults, refaults


def _v1_path(source: Hashable) -> str:
    """The v1 memory cgroup path of a ("v1", path) source."""
    assert isinstance(source, tuple)
    return str(source[1])


def _vector(state: MemoryState) -> tuple[int, ...]:
    """Events by EVENTS, minor and major faults, refaults; 0 for what the files do not count (see _known)."""
    major = state.major_page_faults or 0
    minor = max(0, (state.page_faults or 0) - major)
    return (*(state.events.get(event, 0) for event in EVENTS), minor, major, state.refaults or 0)


def _known(state: MemoryState) -> set[str]:
    """Which of COUNTS the files gave."""
    given = {"minor": state.page_faults, "major": state.major_page_faults, "refaults": state.refaults}
    return {name for name, value in given.items() if value is not None}


FACTORY = CollectorFactory(
    NAME,
    "memory limit, limit hits (memory.events, failcnt, oom kills), page faults and refaults per "
    "workload (cgroup memory.stat)",
    check,
    CgroupMemoryCollector,
)
