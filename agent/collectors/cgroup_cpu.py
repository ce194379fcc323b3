"""The cgroup_cpu collector: CPU limit, throttling, CPU used and thread count per workload, from cgroup files.

The workload hierarchy is walked (agent.machine.cgroups.layout: cgroup2, or on hosts without it systemd's v1
tree, else the cpu hierarchy's), so a workload's threads are counted in the directories its other series are labelled
by. cgroup2 files are used where the cpu controller is enabled there; otherwise (hybrid hosts, v1 hosts) each
directory is matched to its v1 cpu and cpuset cgroups through the same relative path or, failing that, through
/proc/PID/cgroup of one of its processes. On a v1 host a directory's throttling and CPU used are read only from a
cpu cgroup of its own: the same path, or a cpu cgroup at a path the workload hierarchy has no directory at (a runtime
that places the cpu cgroup elsewhere) that no other workload's processes are in. One that several workloads share (a
systemd service without CPU accounting sits in its slice's) is counted under its own directory's workload, not under
each of theirs.

CPU used comes from cgroup2's cpu.stat (user_usec, system_usec: there even when the cpu controller lives in v1),
else from the v1 cpuacct files. The kernel counts it for a cgroup and its descendants together, so of the cgroups
of one workload (a container's nested cgroups) only the outermost are summed, and the root cgroup, whose totals are
the whole machine's, gets none.

A cgroup whose CPU time has not moved since the last scrape ran nothing: no thread of it was made, exited or was
throttled, so its other files (up to eight reads on a hybrid host: its threads, v1 cpu.stat, cpuset, the quota of
each ancestor) are not read again; what was read last is served, and read afresh at least every REFRESH_SECONDS.
What that can miss for a while: a quota changed, or a sleeping thread moved in, while the cgroup stays idle; either
shows as soon as it runs. Its CPU time is read every scrape (cgroup2's cpu.stat; on hosts without cgroup2 every
file is read every scrape).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import NamedTuple

from prometheus_client.core import Metric

from agent import metrics
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.collectors.common.cgroup_tree import controller_availability
from agent.exposition.family import BlockCache
from agent.identity.workload import workload_for_cgroup
from agent.machine.cgroups.cpu import (
    CpuControl,
    CpuUsage,
    MonotonicSplit,
    read_cpu_v1,
    read_cpu_v2,
    read_usage_v1,
    read_usage_v2,
)
from agent.machine.cgroups.files import count_threads, first_process, v2_controllers
from agent.machine.cgroups.layout import CgroupLayout, parse_proc_cgroup
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.cgroups.v1_owner import Claims, may_own
from agent.machine.cpus import online_cpu_count
from agent.machine.facts import MachineFacts
from agent.machine.held_files import HeldFiles
from agent.machine.procfs import SMALL_FILE, ProcFS
from agent.model import CounterTable, Labels

NAME = "cgroup_cpu"
REFRESH_SECONDS = 60.0  # an idle cgroup's limit and throttling files are read at least this often (spread by id)


def check(facts: MachineFacts) -> Availability:
    """Needs a cgroup tree to walk (cgroup2, or the v1 cpu hierarchy) and a cpu controller in some hierarchy."""
    return controller_availability(facts, "cpu")


class CgroupCpuCollector:
    """Reads cgroup CPU files of every cgroup with threads, once per scrape."""

    name = NAME

    def __init__(self, context: CollectorContext, online_cpus: Callable[[], int] = online_cpu_count) -> None:
        """*online_cpus*: how many CPUs a cgroup without quota or cpuset may use (tests pin a fixture machine's)."""
        self._identities = context.identities
        self._layout: CgroupLayout = context.facts.cgroups
        if context.facts.cgroup_root is not None:
            self._root: Path | None = context.facts.cgroup_root
            self._resolver = context.resolver
            self._threads_file = "cgroup.threads"
            self._v2_cpu = "cpu" in v2_controllers(self._root)
        else:  # no cgroup2: the v1 workload hierarchy's directories are the workloads
            self._root = self._layout.workload_tree
            self._resolver = CgroupPathResolver(self._root)
            self._threads_file = "tasks"
            self._v2_cpu = False
        self._proc = ProcFS()
        self._cpus = online_cpus()
        self._max_cgroups = context.settings.max_cgroups
        self._tracked: set[int] = set()
        self._v1_paths: dict[int, tuple[str, str]] = {}
        self._table = CounterTable(width=3, grace_seconds=context.settings.series_grace_seconds)
        self._usage_table = CounterTable(width=2, grace_seconds=context.settings.series_grace_seconds)
        self._v1_split = MonotonicSplit()
        self._last_read: dict[int, _Reading] = {}
        self._files = HeldFiles(
            4 * context.settings.max_cgroups, [str(p) for p in (self._root, *self._layout.v1.values()) if p]
        )
        self._clock: Callable[[], float] = time.monotonic
        shared = context.cpu_stats if context.facts.cgroup_root is not None else None
        self._read_stat = shared.read if shared is not None else self._files.read
        self._usage_blocks = BlockCache(
            lambda labels, row: ([((*labels, "user"), row[0] / 1e9), ((*labels, "system"), row[1] / 1e9)],)
        )
        self._throttling_blocks = BlockCache(
            lambda labels, row: ([(labels, row[0])], [(labels, row[1])], [(labels, row[2] / 1e9)])
        )
        self._limit_blocks = BlockCache(_gauge_rows)
        self._thread_blocks = BlockCache(_gauge_rows)

    def collect(self) -> list[Metric]:
        """Read every tracked cgroup's files and build the families."""
        assert self._root is not None
        paths = self._resolver.snapshot(this_round=True)
        threads: dict[Labels, int] = {}
        limits: dict[Labels, float] = {}
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        usages: dict[Labels, list[tuple[str, Hashable, CpuUsage]]] = {}
        claims = Claims()
        now = self._clock()
        for cgroup_id, path in paths.items():
            reading = self._read_cgroup(cgroup_id, path, now)
            if reading is None:
                continue
            count, source, control, usage, _refresh_at, _stat_text = reading
            labels = workload_for_cgroup(path, self._identities).labels()
            threads[labels] = threads.get(labels, 0) + count
            if usage is not None:
                usages.setdefault(labels, []).append((path, usage[0], usage[1]))
            owned = source != ("v1", "/") and self._own(source, path)
            if owned and isinstance(source, tuple) and source[0] == "v1":
                claims.add(_v1_path(source), labels)
            if control is None:
                continue
            limits[labels] = min(limits.get(labels, control.limit_cores), control.limit_cores)
            if not owned:
                continue  # not in any v1 cpu cgroup of its own: the root's counters are nobody's throttling
            if source not in live:  # several cgroup2 dirs can share one v1 cpu cgroup: count it once
                live[source] = (labels, [control.periods, control.throttled_periods, control.throttled_ns])
        self._tracked &= set(paths)
        self._v1_paths = {k: v for k, v in self._v1_paths.items() if k in self._tracked}
        self._last_read = {k: v for k, v in self._last_read.items() if k in self._tracked}
        if self._threads_file == "tasks":  # a cpu cgroup elsewhere that several workloads are in is none of theirs
            live = {source: row for source, row in live.items() if claims.sole(_v1_path(source))}
        self._table.update(live)
        live_usage = _outermost(usages)
        if self._threads_file == "tasks":
            live_usage = {source: row for source, row in live_usage.items() if claims.sole(_v1_path(source))}
        self._v1_split.keep_only(set(live_usage))
        self._usage_table.update(live_usage)
        self._files.end_round()
        return self._families(threads, limits)

    def close(self) -> None:
        """Close the files held open."""
        self._files.close()

    def _read_cgroup(self, cgroup_id: int, path: str, now: float) -> _Reading | None:
        """A tracked cgroup's thread count, throttling source, limit and throttling, and CPU used; None for a cgroup
        not tracked (no threads, or beyond --max-cgroups). An idle cgroup's last reading is served again."""
        assert self._root is not None
        last = self._last_read.get(cgroup_id)
        usage: tuple[Hashable, CpuUsage] | None = None
        stat_text = None
        if self._threads_file == "cgroup.threads" and path != "/":
            stat_text = self._read_stat(f"{self._root}{path}/cpu.stat")
            idle = last is not None and last.usage is not None and stat_text == last.stat_text
            if idle and last is not None and now < last.refresh_at:
                return last  # not a byte of its cpu.stat (CPU time included) moved
            parsed = None if stat_text is None else read_usage_v2(self._root, path, lambda _path: stat_text)
            usage = None if parsed is None else (("v2", cgroup_id), parsed)
        count = count_threads(self._root, path, self._threads_file, self._files.read)
        if count is None or (count == 0 and cgroup_id not in self._tracked):
            return None
        if cgroup_id not in self._tracked and len(self._tracked) >= self._max_cgroups:
            return None
        self._tracked.add(cgroup_id)
        source, control = self._read(cgroup_id, path)
        if path != "/" and usage is None:
            usage = self._read_usage(cgroup_id, path, source)
        refresh_at = now + REFRESH_SECONDS * (1 + (cgroup_id % 16) / 16)
        reading = self._last_read[cgroup_id] = _Reading(count, source, control, usage, refresh_at, stat_text)
        return reading

    def _read(self, cgroup_id: int, path: str) -> tuple[Hashable, CpuControl | None]:
        assert self._root is not None
        if self._v2_cpu:
            return ("v2", cgroup_id), read_cpu_v2(self._root, path, self._cpus, self._files.read)
        cpu_root = self._layout.v1.get("cpu")
        if cpu_root is None:
            return ("none", cgroup_id), None
        cpu_path, cpuset_path = self._v1_paths.get(cgroup_id) or self._find_v1_paths(cgroup_id, path, cpu_root)
        cpuset_root = self._layout.v1.get("cpuset")
        control = read_cpu_v1(cpu_root, cpu_path, cpuset_root, cpuset_path, self._cpus, self._files.read)
        return ("v1", cpu_path), control

    def _read_usage(self, cgroup_id: int, path: str, v1_source: Hashable | None) -> tuple[Hashable, CpuUsage] | None:
        """CPU used by the cgroup (and its descendants): cgroup2's cpu.stat, else (knowing the cgroup's v1 cpu
        source) the v1 cpuacct cgroup."""
        assert self._root is not None
        if self._threads_file == "cgroup.threads":
            usage = read_usage_v2(self._root, path, self._files.read)
            if usage is not None:
                return ("v2", cgroup_id), usage
        if v1_source is None:
            return None
        cpuacct_root = self._layout.v1.get("cpuacct")
        if cpuacct_root is None or not isinstance(v1_source, tuple) or v1_source[0] != "v1":
            return None
        cpu_path = str(v1_source[1])
        if cpu_path == "/" or not self._own(v1_source, path):
            return None
        # cpuacct is mounted with cpu almost everywhere; elsewhere runtimes mirror the path in every hierarchy.
        usage = read_usage_v1(cpuacct_root, cpu_path, self._files.read)
        source = ("cpuacct", cpu_path)
        return None if usage is None else (source, self._v1_split.adjust(source, usage))

    def _own(self, source: Hashable, path: str) -> bool:
        """Whether the cpu cgroup *source* may be the directory at *path*'s own. On hosts with cgroup2 every directory
        keeps the v1 cpu cgroup it is matched to (several directories of one container share one); on a v1 host
        as agent.machine.cgroups.v1_owner says (collect drops one that several workloads claim)."""
        if self._threads_file == "cgroup.threads":
            return True
        assert self._root is not None
        return may_own(self._root, path, _v1_path(source))

    def _find_v1_paths(self, cgroup_id: int, path: str, cpu_root: Path) -> tuple[str, str]:
        """v1 cpu and cpuset paths of a cgroup2 directory (runtimes usually mirror the path in every hierarchy)."""
        assert self._root is not None
        cpuset_root = self._layout.v1.get("cpuset")
        if (cpu_root / path.lstrip("/")).is_dir():
            found = (path, path if cpuset_root and (cpuset_root / path.lstrip("/")).is_dir() else "/")
        else:
            pid = first_process(self._root, path)
            text = None if pid is None else self._proc.read_text(pid, "cgroup", SMALL_FILE)
            proc = parse_proc_cgroup(text) if text is not None else {}
            found = (proc.get("cpu", "/"), proc.get("cpuset", "/"))
        self._v1_paths[cgroup_id] = found
        return found

    def _families(self, threads: dict[Labels, int], limits: dict[Labels, float]) -> list[Metric]:
        """The families, a workload's rows of each made again only when what they show changed."""
        usage = metrics.CPU_USAGE_SECONDS.family()
        periods = metrics.CPU_PERIODS.family()
        throttled = metrics.CPU_THROTTLED_PERIODS.family()
        throttled_seconds = metrics.CPU_THROTTLED_SECONDS.family()
        limit = metrics.CPU_LIMIT_CORES.family()
        thread_count = metrics.THREADS.family()
        self._usage_blocks.add_to([usage], self._usage_table.rows())
        self._throttling_blocks.add_to([periods, throttled, throttled_seconds], self._table.rows())
        self._limit_blocks.add_to([limit], limits.items())
        self._thread_blocks.add_to([thread_count], threads.items())
        tracked = metrics.TRACKED_SERIES.family()
        tracked.add_metric([NAME], len(threads))
        return [periods, throttled, throttled_seconds, usage, limit, thread_count, tracked]


def _v1_path(source: Hashable) -> str:
    """The v1 cgroup path of a ("v1" or "cpuacct", path) source."""
    assert isinstance(source, tuple)
    return str(source[1])


def _gauge_rows(labels: Labels, value: float) -> tuple[list[tuple[Labels, float]]]:
    """A workload's one row of a gauge family."""
    return ([(labels, value)],)


class _Reading(NamedTuple):
    """What was last read of one cgroup, and until when it may be served again while the cgroup stays idle."""

    threads: int
    source: Hashable
    control: CpuControl | None
    usage: tuple[Hashable, CpuUsage] | None
    refresh_at: float
    stat_text: str | None  # cgroup2 cpu.stat as read: the same text next time means the cgroup stayed idle


def _outermost(
    usages: dict[Labels, list[tuple[str, Hashable, CpuUsage]]],
) -> dict[Hashable, tuple[Labels, Sequence[int]]]:
    """Per source, the usage of each workload's cgroups that have no ancestor among that workload's cgroups."""
    live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
    for labels, found in usages.items():
        paths = {path for path, _source, _usage in found}
        for path, source, usage in found:
            parents = path.split("/")
            if any("/".join(parents[:depth]) in paths for depth in range(2, len(parents))):
                continue
            live.setdefault(source, (labels, [usage.user_ns, usage.system_ns]))
    return live


FACTORY = CollectorFactory(
    NAME,
    "CPU limit, throttling, CPU used and threads per workload (cgroup cpu.stat, cpuacct, cpu.max / cfs quota, cpuset)",
    check,
    CgroupCpuCollector,
)
