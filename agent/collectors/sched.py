"""The sched collector: off-CPU time by reason and run-queue latency per workload (and per process)."""

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
from agent.probes.sched import OFFCPU_REASONS, REQUIRED_TRACEPOINTS, RUNQ_BUCKET_BOUNDS, SchedProbe, SchedSnapshot

NAME = "sched"
_BUCKETS = bucket_labels(RUNQ_BUCKET_BOUNDS)
_REASONS = len(OFFCPU_REASONS)


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the scheduler tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SchedCollector:
    """Reads the sched probe at scrape time and keeps per-workload totals monotonic."""

    name = NAME

    def __init__(self, context: CollectorContext) -> None:
        settings = context.settings
        self._resolver = context.resolver
        self._probe = SchedProbe(
            probe_limits(settings),
            context.facts.tracefs,
        )
        # Vector per cgroup: off-CPU ns by reason, run-queue ns, run-queue histogram buckets.
        self._identities = context.identities
        self._totals = CgroupTotals(
            context.resolver,
            context.identities,
            _REASONS + 1 + len(_BUCKETS),
            settings.series_grace_seconds,
            self._probe.forget_cgroups,
        )
        self._top = TopProcesses(settings.process_top_k)

    def collect(self) -> list[Metric]:
        """Read the maps once and build every family of this collector."""
        snapshot = self._probe.read()
        self._totals.update(
            {
                cgroup_id: [*s.counts.offcpu_ns, s.counts.runq_ns, *s.runq_buckets]
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
        offcpu = metrics.OFFCPU_SECONDS.family()
        runq = metrics.RUNQUEUE_LATENCY.family()
        for labels, row in self._totals.rows():
            for index, reason in enumerate(OFFCPU_REASONS):
                offcpu.add_metric([*labels, reason], row[index] / 1e9)
            runq.add_metric(labels, cumulative(_BUCKETS, row[_REASONS + 1 :]), row[_REASONS] / 1e9)
        return [offcpu, runq]

    def _process_families(self, snapshot: SchedSnapshot) -> list[Metric]:
        offcpu = metrics.PROCESS_OFFCPU_SECONDS.family()
        runq = metrics.PROCESS_RUNQUEUE_WAIT_SECONDS.family()
        processes = snapshot.processes
        # Activity: how long its threads waited for a CPU (the contention this collector is about).
        chosen = self._top.select({pid: p.counts.runq_ns for pid, p in processes.items()})
        paths = self._resolver.resolve(processes[pid].cgroup_id for pid in chosen)
        for pid in chosen:
            process = processes[pid]
            labels = process_labels(pid, paths[process.cgroup_id], self._identities)
            for index, reason in enumerate(OFFCPU_REASONS):
                offcpu.add_metric([*labels, reason], process.counts.offcpu_ns[index] / 1e9)
            runq.add_metric(labels, process.counts.runq_ns / 1e9)
        return [offcpu, runq]


def _start(context: CollectorContext) -> Collector:
    return SchedCollector(context)


FACTORY = CollectorFactory(
    name=NAME,
    description="off-CPU time (preempted, blocked) and run-queue latency (bpf/sched.bpf.c)",
    check=check,
    start=_start,
)
