"""The syscalls collector: sched_yield and futex per workload (and per process for the most active)."""

from __future__ import annotations

from prometheus_client.core import Metric

from agent import metrics
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory
from agent.collectors.common import (
    CgroupTotals,
    TopProcesses,
    bpf_availability,
    bucket_labels,
    cumulative,
    probe_limits,
    process_labels,
    self_families,
)
from agent.facts import MachineFacts
from agent.probes.syscalls import (
    FUTEX_OPS,
    REQUIRED_TRACEPOINTS,
    WAIT_BUCKET_BOUNDS,
    SyscallProbe,
    SyscallSnapshot,
)

NAME = "syscalls"
_BUCKETS = bucket_labels(WAIT_BUCKET_BOUNDS)
_OPS = len(FUTEX_OPS)


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the syscall tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SyscallsCollector:
    """Reads the syscalls probe at scrape time and keeps per-workload totals monotonic."""

    name = NAME

    def __init__(self, context: CollectorContext) -> None:
        settings = context.settings
        self._resolver = context.resolver
        self._probe = SyscallProbe(
            probe_limits(settings),
            context.facts.tracefs,
        )
        # Vector per cgroup: yields, futex calls by op, wait ns, wait histogram buckets.
        self._identities = context.identities
        self._totals = CgroupTotals(
            context.resolver,
            context.identities,
            1 + _OPS + 1 + len(_BUCKETS),
            settings.series_grace_seconds,
            self._probe.forget_cgroups,
        )
        self._top = TopProcesses(settings.process_top_k)

    def collect(self) -> list[Metric]:
        """Read the maps once and build every family of this collector."""
        snapshot = self._probe.read()
        self._totals.update(
            {
                cgroup_id: [s.counts.yields, *s.counts.futex_calls, s.counts.futex_wait_ns, *s.wait_buckets]
                for cgroup_id, s in snapshot.cgroups.items()
            }
        )
        return [
            *self._workload_families(),
            *self._process_families(snapshot),
            *self_families(NAME, snapshot.health, self._probe.program_stats(), len(self._totals)),
        ]

    def close(self) -> None:
        """Detach the programs."""
        self._probe.close()

    def _workload_families(self) -> list[Metric]:
        yields = metrics.SCHED_YIELD_CALLS.family()
        futex = metrics.FUTEX_CALLS.family()
        wait_seconds = metrics.FUTEX_WAIT_SECONDS.family()
        wait_hist = metrics.FUTEX_WAIT_DURATION.family()
        for labels, row in self._totals.rows():
            yields.add_metric(labels, row[0])
            for index, op in enumerate(FUTEX_OPS):
                futex.add_metric([*labels, op], row[1 + index])
            wait_total = row[1 + _OPS] / 1e9
            wait_seconds.add_metric(labels, wait_total)
            wait_hist.add_metric(labels, cumulative(_BUCKETS, row[2 + _OPS :]), wait_total)
        return [yields, futex, wait_seconds, wait_hist]

    def _process_families(self, snapshot: SyscallSnapshot) -> list[Metric]:
        yields = metrics.PROCESS_SCHED_YIELD_CALLS.family()
        futex = metrics.PROCESS_FUTEX_CALLS.family()
        wait_seconds = metrics.PROCESS_FUTEX_WAIT_SECONDS.family()
        processes = snapshot.processes
        chosen = self._top.select({pid: p.counts.yields + sum(p.counts.futex_calls) for pid, p in processes.items()})
        paths = self._resolver.resolve(processes[pid].cgroup_id for pid in chosen)
        for pid in chosen:
            process = processes[pid]
            labels = process_labels(pid, paths[process.cgroup_id], self._identities)
            yields.add_metric(labels, process.counts.yields)
            for index, op in enumerate(FUTEX_OPS):
                futex.add_metric([*labels, op], process.counts.futex_calls[index])
            wait_seconds.add_metric(labels, process.counts.futex_wait_ns / 1e9)
        return [yields, futex, wait_seconds]


def _start(context: CollectorContext) -> Collector:
    return SyscallsCollector(context)


FACTORY = CollectorFactory(
    name=NAME,
    description="sched_yield and futex calls, futex wait time (bpf/syscalls.bpf.c)",
    check=check,
    start=_start,
)
