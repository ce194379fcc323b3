"""The syscalls collector: sched_yield and futex per workload (and per process for the most active)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from agent import metrics
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory
from agent.facts import MachineFacts
from agent.model import CounterTable, Labels
from agent.probes.syscalls import (
    FUTEX_OPS,
    WAIT_BUCKET_BOUNDS,
    CgroupSyscalls,
    SyscallCounts,
    SyscallProbe,
    SyscallProbeLimits,
    SyscallSnapshot,
    missing_tracepoints,
)
from agent.workloads import REMOVED, Workload, workload_for_cgroup

NAME = "syscalls"
UNRESOLVED = Workload(cgroup="(unresolved)")
_go_float: Callable[[float], str] = floatToGoString
_BUCKET_LABELS = [_go_float(bound) for bound in WAIT_BUCKET_BOUNDS] + ["+Inf"]
_OPS = len(FUTEX_OPS)


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the syscall tracepoints, and kernel headers."""
    if not facts.can_load_bpf:
        return Availability(
            False,
            "no right to load BPF programs",
            "run as root, or grant CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN on kernels < 5.8)",
        )
    if facts.tracefs is None:
        return Availability(
            False,
            "tracefs is not mounted",
            "mount -t tracefs tracefs /sys/kernel/tracing (schedwatch run does this itself as root)",
        )
    missing = missing_tracepoints(facts.tracefs)
    if missing:
        return Availability(
            False, f"kernel lacks tracepoints {', '.join(missing)}", "build the kernel with CONFIG_FTRACE_SYSCALLS=y"
        )
    if facts.headers is None:
        return Availability(False, "no kernel headers", facts.headers_error)
    return Availability(True)


class SyscallsCollector:
    """Reads the syscalls probe at scrape time and keeps per-workload totals monotonic."""

    name = NAME

    def __init__(self, context: CollectorContext) -> None:
        settings = context.settings
        self._resolver = context.resolver
        self._top_k = settings.process_top_k
        self._probe = SyscallProbe(
            SyscallProbeLimits(settings.max_cgroups, settings.max_processes, settings.max_threads),
            context.facts.tracefs,
        )
        # yields, futex calls by op, wait ns, wait histogram buckets
        self._table = CounterTable(
            width=1 + _OPS + 1 + len(_BUCKET_LABELS),
            grace_seconds=settings.series_grace_seconds,
            keep_forever=frozenset({REMOVED.labels()}),
        )
        self._last_activity: dict[int, int] = {}

    def collect(self) -> list[Metric]:
        """Read the maps once and build every family of this collector."""
        snapshot = self._probe.read()
        self._update_table(snapshot)
        families = self._workload_families()
        families += self._process_families(snapshot)
        families += self._self_families(snapshot)
        return families

    def close(self) -> None:
        """Detach the programs."""
        self._probe.close()

    def _update_table(self, snapshot: SyscallSnapshot) -> None:
        paths = self._resolver.resolve(snapshot.cgroups)
        healthy = self._resolver.healthy
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        removed = []
        for cgroup_id, stats in snapshot.cgroups.items():
            path = paths[cgroup_id]
            if path is None and healthy:
                removed.append(cgroup_id)
            workload = workload_for_cgroup(path) if healthy else UNRESOLVED
            live[cgroup_id] = (workload.labels(), _cgroup_vector(stats))
        self._table.update(live)
        if removed:
            # Their final values are in the table now; free the kernel entries.
            self._probe.forget_cgroups(removed)
            self._resolver.forget(removed)

    def _workload_families(self) -> list[Metric]:
        yields = metrics.SCHED_YIELD_CALLS.family()
        futex = metrics.FUTEX_CALLS.family()
        wait_seconds = metrics.FUTEX_WAIT_SECONDS.family()
        wait_hist = metrics.FUTEX_WAIT_DURATION.family()
        for labels, row in self._table.rows():
            yields.add_metric(labels, row[0])
            for index, op in enumerate(FUTEX_OPS):
                futex.add_metric([*labels, op], row[1 + index])
            wait_total = row[1 + _OPS] / 1e9
            wait_seconds.add_metric(labels, wait_total)
            cumulative, buckets = 0, []
            for bound, count in zip(_BUCKET_LABELS, row[2 + _OPS :], strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            wait_hist.add_metric(labels, buckets, wait_total)
        return [yields, futex, wait_seconds, wait_hist]

    def _process_families(self, snapshot: SyscallSnapshot) -> list[Metric]:
        yields = metrics.PROCESS_SCHED_YIELD_CALLS.family()
        futex = metrics.PROCESS_FUTEX_CALLS.family()
        wait_seconds = metrics.PROCESS_FUTEX_WAIT_SECONDS.family()
        families: list[Metric] = [yields, futex, wait_seconds]
        if self._top_k == 0 or not snapshot.processes:
            self._last_activity = {}
            return families
        activity = {pid: _activity(p.counts) for pid, p in snapshot.processes.items()}
        recent = {pid: total - self._last_activity.get(pid, 0) for pid, total in activity.items()}
        self._last_activity = activity
        ranked = sorted(
            (pid for pid in activity if activity[pid] > 0), key=lambda pid: (recent[pid], activity[pid]), reverse=True
        )[: self._top_k]
        paths = self._resolver.resolve(snapshot.processes[pid].cgroup_id for pid in ranked)
        for pid in ranked:
            process = snapshot.processes[pid]
            labels = [str(pid), _comm(pid), *workload_for_cgroup(paths[process.cgroup_id]).labels()]
            yields.add_metric(labels, process.counts.yields)
            for index, op in enumerate(FUTEX_OPS):
                futex.add_metric([*labels, op], process.counts.futex_calls[index])
            wait_seconds.add_metric(labels, process.counts.futex_wait_ns / 1e9)
        return families

    def _self_families(self, snapshot: SyscallSnapshot) -> list[Metric]:
        entries = metrics.BPF_MAP_ENTRIES.family()
        capacity = metrics.BPF_MAP_MAX_ENTRIES.family()
        dropped = metrics.BPF_EVENTS_DROPPED.family()
        runs = metrics.BPF_PROGRAM_RUNS.family()
        run_seconds = metrics.BPF_PROGRAM_RUN_SECONDS.family()
        tracked = metrics.TRACKED_SERIES.family()
        for name, count in snapshot.map_entries.items():
            entries.add_metric([NAME, name], count)
            capacity.add_metric([NAME, name], snapshot.map_capacity[name])
        for name, count in snapshot.drops.items():
            dropped.add_metric([NAME, name], count)
        for program in self._probe.program_stats():
            runs.add_metric([NAME, program.program], program.runs)
            run_seconds.add_metric([NAME, program.program], program.run_seconds)
        tracked.add_metric([NAME], len(self._table))
        return [entries, capacity, dropped, runs, run_seconds, tracked]


def _cgroup_vector(stats: CgroupSyscalls) -> list[int]:
    counts = stats.counts
    return [counts.yields, *counts.futex_calls, counts.futex_wait_ns, *stats.wait_buckets]


def _activity(counts: SyscallCounts) -> int:
    return counts.yields + sum(counts.futex_calls)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()[:16]
    except OSError:
        return ""


def _start(context: CollectorContext) -> Collector:
    return SyscallsCollector(context)


FACTORY = CollectorFactory(
    name=NAME,
    description="sched_yield and futex calls, futex wait time (bpf/syscalls.bpf.c)",
    check=check,
    start=_start,
)
