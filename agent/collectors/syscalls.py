"""The syscalls collector: sched_yield and futex per workload (and per process for the most active), and the call
sites of the yields and futex waits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.syscalls import (
    DEFAULT_CALL_SITES,
    FUTEX_OPS,
    REQUIRED_TRACEPOINTS,
    WAIT_BUCKET_BOUNDS,
    CgroupSyscalls,
    ProcessSyscalls,
    SyscallProbe,
    SyscallSnapshot,
)
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.bpf_collector import BpfCollector
from agent.collectors.common.call_sites import CallSiteRows, SiteChooser
from agent.collectors.common.histograms import bucket_labels, cumulative
from agent.collectors.common.limits import probe_limits
from agent.collectors.common.ticker import Ticker
from agent.exposition.family import RowFamily
from agent.log import get_logger
from agent.machine.facts import MachineFacts
from agent.model import Labels
from agent.symbols.symbolizer import Symbolizer

NAME = "syscalls"
_BUCKETS = bucket_labels(WAIT_BUCKET_BOUNDS)
_OPS = len(FUTEX_OPS)
_WAITS = tuple(FUTEX_OPS.index(op) for op in ("wait", "waitv", "lock_pi"))  # the futex calls whose sites count
EXITED_KEY_FLAG = 1 << 63  # bpf/schedwatch.h: keyed by process, the totals of a process that exited
log = get_logger(NAME)


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the syscall tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SyscallsCollector(BpfCollector):
    """sched_yield and futex counts per workload; per-cgroup vector: yields, futex calls by op, wait ns, buckets."""

    name = NAME
    vector_width = 1 + _OPS + 1 + len(_BUCKETS)

    def __init__(self, context: CollectorContext, probe: SyscallProbe | None = None) -> None:
        """*probe*: read instead of loading the program (tests hand fixture snapshots in)."""
        settings = context.settings
        if probe is None:
            probe = SyscallProbe(
                probe_limits(settings, context.keys),
                context.facts.tracefs,
                call_sites=DEFAULT_CALL_SITES if settings.code_workloads > 0 else 0,  # 0: call sites not counted
                site_workloads=settings.code_workloads,
            )
        super().__init__(context, probe)
        self._syscall_probe = probe
        self.sites = CallSiteRows(
            context.keys,
            context.identities,
            Symbolizer(version_of=context.library_version),
            settings.code_top_k,
            settings.code_workloads,
            settings.series_grace_seconds,
            probe.forget_call_sites,
        )
        self._sites_ticker = Ticker(NAME, self._read_sites) if probe.call_sites else None
        self._site_chooser = SiteChooser(settings.code_workloads)

    def _read_sites(self) -> None:
        sites = self._syscall_probe.read_call_sites()
        if sites is not None:
            self.sites.update(sites)

    def snapshot_families(self, snapshot: SyscallSnapshot) -> list[Metric]:
        """Yields and futex waits by call site, per workload (read now, and every tick between scrapes); then the
        workloads whose sites are counted until the next scrape."""
        if self._sites_ticker is None:
            return []
        with self._sites_ticker.lock:
            self._read_sites()
            families = self.sites.families()
        calls = {
            key: stats.counts.yields + sum(stats.counts.futex_calls[index] for index in _WAITS)
            for key, stats in snapshot.cgroups.items()
            if key < EXITED_KEY_FLAG
        }
        try:
            self._syscall_probe.choose_site_workloads(self._site_chooser.choose(calls))
        except OSError as error:  # the sites of the workloads chosen last go on being counted
            log.warning(
                "call_sites_not_chosen",
                error=f"writing a BPF map: {error}",
                fix="allow bpf(2) command 2 (BPF_MAP_UPDATE_ELEM) and 3 (BPF_MAP_DELETE_ELEM) in the agent's seccomp "
                "profile; the counts are unaffected",
            )
        return families

    def close(self) -> None:
        """Stop reading call sites, then detach the programs."""
        if self._sites_ticker is not None:
            self._sites_ticker.close()
        super().close()

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
