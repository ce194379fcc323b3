"""The syscalls collector: sched_yield and futex per workload (and per process for the most active)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.syscalls import (
    FUTEX_OPS,
    REQUIRED_TRACEPOINTS,
    WAIT_BUCKET_BOUNDS,
    CgroupSyscalls,
    ProcessSyscalls,
    SyscallProbe,
)
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.bpf_collector import BpfCollector
from agent.collectors.common.histograms import bucket_labels, cumulative
from agent.collectors.common.limits import probe_limits
from agent.exposition.family import RowFamily
from agent.machine.facts import MachineFacts
from agent.model import Labels

NAME = "syscalls"
_BUCKETS = bucket_labels(WAIT_BUCKET_BOUNDS)
_OPS = len(FUTEX_OPS)


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the syscall tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SyscallsCollector(BpfCollector):
    """sched_yield and futex counts per workload; per-cgroup vector: yields, futex calls by op, wait ns, buckets."""

    name = NAME
    vector_width = 1 + _OPS + 1 + len(_BUCKETS)

    def __init__(self, context: CollectorContext, probe: SyscallProbe | None = None) -> None:
        """*probe*: read instead of loading the program (tests hand fixture snapshots in)."""
        if probe is None:
            probe = SyscallProbe(probe_limits(context.settings, context.keys), context.facts.tracefs)
        super().__init__(context, probe)

    def cgroup_vector(self, stats: CgroupSyscalls) -> Sequence[int]:
        """Yields, futex calls by op, wait ns, wait histogram buckets."""
        counts = stats.counts
        return (counts.yields, *counts.futex_calls, counts.futex_wait_ns, *stats.wait_buckets)

    def workload_families(self) -> list[RowFamily]:
        """Yields, futex calls by op, futex wait seconds and histogram per workload."""
        return [
            metrics.SCHED_YIELD_CALLS.family(),
            metrics.FUTEX_CALLS.family(),
            metrics.FUTEX_WAIT_SECONDS.family(),
            metrics.FUTEX_WAIT_DURATION.family(),
        ]

    def workload_series(self, labels: Labels, totals: Sequence[int]) -> Sequence[list[Any]]:
        """One workload's yields, futex calls by op, wait seconds and wait histogram."""
        wait_total = totals[1 + _OPS] / 1e9
        return (
            [(labels, totals[0])],
            [((*labels, op), totals[1 + index]) for index, op in enumerate(FUTEX_OPS)],
            [(labels, wait_total)],
            [(labels, _BUCKETS, cumulative(totals[2 + _OPS :]), wait_total)],
        )

    def process_families(self, processes: dict[int, ProcessSyscalls]) -> list[Metric]:
        """The same per live process, for the most active ones (yields plus futex calls)."""
        yields = metrics.PROCESS_SCHED_YIELD_CALLS.family()
        futex = metrics.PROCESS_FUTEX_CALLS.family()
        wait_seconds = metrics.PROCESS_FUTEX_WAIT_SECONDS.family()
        activity = {pid: p.counts.yields + sum(p.counts.futex_calls) for pid, p in processes.items()}
        for labels, process in self.chosen_processes(processes, activity):
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
