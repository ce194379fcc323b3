"""The sched collector: off-CPU time by reason, run-queue latency (and its split by holder) and blocked time by sleep
per workload (and off-CPU time and run-queue wait per process)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.sched import (
    HOLDERS,
    MISSED_EVENTS,
    OFFCPU_REASONS,
    REQUIRED_TRACEPOINTS,
    RUNQ_BUCKET_BOUNDS,
    SLEEPS,
    CgroupSched,
    ProcessSched,
    SchedProbe,
    SchedSnapshot,
)
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.bpf_collector import BpfCollector
from agent.collectors.common.histograms import bucket_labels, cumulative
from agent.collectors.common.limits import probe_limits
from agent.exposition.family import RowFamily
from agent.identity.labels import label_value
from agent.identity.workload import workload_for_cgroup
from agent.machine.facts import MachineFacts
from agent.model import CounterTable, Labels

NAME = "sched"
_BUCKETS = bucket_labels(RUNQ_BUCKET_BOUNDS)
_REASONS = len(OFFCPU_REASONS)
_MISSED = len(MISSED_EVENTS)
_BUCKETS_END = _REASONS + 1 + len(_BUCKETS)  # the vector: off-CPU ns by reason, run-queue ns, buckets, missed,
_MISSED_END = _BUCKETS_END + _MISSED  # run-queue ns by holder, blocked ns by sleep
_HOLDERS_END = _MISSED_END + len(HOLDERS)
NEIGHBOURS_PER_WORKLOAD = 3  # neighbours exported per workload: those that held its CPUs longest


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the scheduler tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SchedCollector(BpfCollector):
    """Off-CPU time, run-queue latency and blocked time per workload; per-cgroup vector: off-CPU ns by reason,
    run-queue ns, run-queue histogram buckets, events missed by kind, run-queue ns by holder, blocked ns by sleep."""

    name = NAME
    vector_width = _HOLDERS_END + len(SLEEPS)

    def __init__(self, context: CollectorContext, probe: SchedProbe | None = None) -> None:
        """*probe*: read instead of loading the program (tests hand fixture snapshots in)."""
        if probe is None:
            probe = SchedProbe(probe_limits(context.settings, context.keys), context.facts.tracefs)
        super().__init__(context, probe)
        self._neighbours = CounterTable(width=1, grace_seconds=context.settings.series_grace_seconds)

    def cgroup_vector(self, stats: CgroupSched) -> Sequence[int]:
        """Off-CPU ns by reason, run-queue ns, run-queue histogram buckets, events missed by kind, run-queue ns by
        holder, blocked ns by sleep."""
        return (
            *stats.counts.offcpu_ns,
            stats.counts.runq_ns,
            *stats.runq_buckets,
            *stats.missed,
            *stats.runq_by_holder_ns,
            *stats.blocked_ns,
        )

    def workload_families(self) -> list[RowFamily]:
        """Off-CPU seconds by reason, the run-queue histogram, the events missed, run-queue seconds by holder and
        blocked seconds by sleep, per workload."""
        return [
            metrics.OFFCPU_SECONDS.family(),
            metrics.RUNQUEUE_LATENCY.family(),
            metrics.SCHED_EVENTS_MISSED.family(),
            metrics.RUNQUEUE_WAIT_BY_HOLDER_SECONDS.family(),
            metrics.BLOCKED_SECONDS.family(),
        ]

    def workload_series(self, labels: Labels, totals: Sequence[int]) -> Sequence[list[Any]]:
        """One workload's off-CPU seconds by reason, run-queue histogram, the kinds of event missed (if any),
        run-queue seconds by holder and blocked seconds by sleep (every holder and sleep, zeros included)."""
        missed = totals[_BUCKETS_END:_MISSED_END]
        holders = totals[_MISSED_END:_HOLDERS_END]
        sleeps = totals[_HOLDERS_END:]
        return (
            [((*labels, reason), totals[index] / 1e9) for index, reason in enumerate(OFFCPU_REASONS)],
            [(labels, _BUCKETS, cumulative(totals[_REASONS + 1 : _BUCKETS_END]), totals[_REASONS] / 1e9)],
            [((*labels, event), count) for event, count in zip(MISSED_EVENTS, missed, strict=True) if count],
            [((*labels, holder), ns / 1e9) for holder, ns in zip(HOLDERS, holders, strict=True)],
            [((*labels, sleep), ns / 1e9) for sleep, ns in zip(SLEEPS, sleeps, strict=True)],
        )

    def process_families(self, processes: dict[int, ProcessSched]) -> list[Metric]:
        """The same per live process, for those whose threads waited longest for a CPU."""
        offcpu = metrics.PROCESS_OFFCPU_SECONDS.family()
        runq = metrics.PROCESS_RUNQUEUE_WAIT_SECONDS.family()
        by_holder = metrics.PROCESS_RUNQUEUE_WAIT_BY_HOLDER_SECONDS.family()
        blocked = metrics.PROCESS_BLOCKED_SECONDS.family()
        activity = {pid: p.counts.runq_ns for pid, p in processes.items()}
        for labels, process in self.chosen_processes(processes, activity):
            for index, reason in enumerate(OFFCPU_REASONS):
                offcpu.add_metric([*labels, reason], process.counts.offcpu_ns[index] / 1e9)
            runq.add_metric(labels, process.counts.runq_ns / 1e9)
            for holder, ns in zip(HOLDERS, process.runq_by_holder_ns, strict=True):
                by_holder.add_metric([*labels, holder], ns / 1e9)
            for sleep, ns in zip(SLEEPS, process.blocked_ns, strict=True):
                blocked.add_metric([*labels, sleep], ns / 1e9)
        return [offcpu, runq, by_holder, blocked]

    def snapshot_families(self, snapshot: SchedSnapshot) -> list[Metric]:
        """Each workload's wait for a CPU held by another workload, by that neighbour, for its top neighbours."""
        pairs = snapshot.neighbours
        places = self._keys.place({key for pair in pairs for key in pair})
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        for (waiter, holder), ns in pairs.items():
            waiting, holding = places.get(waiter), places.get(holder)
            if waiting is None or holding is None:
                continue
            waiter_labels = workload_for_cgroup(waiting.path, self._identities).labels()
            neighbour = workload_for_cgroup(holding.path, self._identities)
            if neighbour.labels() == waiter_labels:
                continue  # two cgroups of one workload: its own threads, not a neighbour
            live[(waiter, holder)] = ((*waiter_labels, label_value(neighbour.name)), (ns,))
        self._neighbours.update(live)  # each pair a source: the pairs of one workload's cgroups are summed
        by_workload: dict[Labels, list[tuple[Labels, int]]] = {}
        for pair_labels, (ns,) in self._neighbours.rows():
            by_workload.setdefault(pair_labels[:-1], []).append((pair_labels, ns))
        family = metrics.RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS.family()
        for rows in by_workload.values():
            for pair_labels, ns in sorted(rows, key=lambda row: -row[1])[:NEIGHBOURS_PER_WORKLOAD]:
                family.add_metric(list(pair_labels), ns / 1e9)
        return [family]


def _start(context: CollectorContext) -> Collector:
    return SchedCollector(context)


FACTORY = CollectorFactory(
    name=NAME,
    description="off-CPU time (preempted, blocked) and run-queue latency (bpf/sched.bpf.c)",
    check=check,
    start=_start,
)
