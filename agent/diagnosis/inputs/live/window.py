"""Two readings of schedwatch's series -> what each workload did between them (WorkloadView counts)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from agent import metrics
from agent.diagnosis.facts import Workload, WorkloadView
from agent.metrics import MetricSpec
from agent.series.reading import Reading
from agent.tables import syscalls

SYSCALLS_COLLECTOR = syscalls.TABLE.collector


@dataclass(frozen=True)
class Window:
    """Two readings of the same source, *before* first; *spans* the seconds of it each workload existed, when a
    source knows (Prometheus: its first and last samples in the range), for workloads younger than the window."""

    before: Reading
    after: Reading
    spans: Mapping[Workload, float] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        """Time between the readings."""
        return self.after.at - self.before.at

    def seconds_of(self, ref: Workload) -> float:
        """The time *ref*'s counts cover: the part of the window it existed in, the whole window when unknown."""
        span = self.spans.get(ref)
        return self.seconds if span is None else min(span, self.seconds)

    def delta(self, ref: Workload, spec: MetricSpec, part: str = "") -> float | None:
        """How much a counter (its *part*) grew over the window; None when unknown or when it went backwards (an
        agent restarted in between). A workload first seen in the second reading counts from 0."""
        after = self.after.count(ref, spec, part)
        if after is None:
            return None
        earlier = self.earlier_ref(ref)
        before = self.before.count(earlier, spec, part)
        if before is None:
            if earlier in self.before.workloads or not self.before.up:
                return None
            before = 0.0
        return None if after < before else after - before

    def earlier_ref(self, ref: Workload) -> Workload:
        """*ref* as the first reading named it: a container whose names became known in the window was counted
        under its id alone (the agent moves its series, history included, to the names)."""
        if ref in self.before.workloads or not ref.container_id:
            return ref
        for known in self.before.workloads:
            if known.container_id == ref.container_id:
                return known
        return ref


def workload_view(window: Window, ref: Workload, node_cpus: int | None) -> WorkloadView:
    """The counts, CPU, limits and threads of one workload over the window (its processes are read elsewhere)."""
    totals = window.after.workloads.get(ref)
    limit = None if totals is None else totals.gauge(metrics.CPU_LIMIT_CORES)
    threads = None if totals is None else totals.gauge(metrics.THREADS)
    workers = None if totals is None else totals.gauge(metrics.POOL_WORKERS)
    user = window.delta(ref, metrics.CPU_USAGE_SECONDS, "user")
    system = window.delta(ref, metrics.CPU_USAGE_SECONDS, "system")
    seconds = window.seconds_of(ref)
    used = None if user is None or system is None or seconds <= 0 else (user + system) / seconds
    share = None if user is None or system is None or user + system <= 0 else system / (user + system)
    futex = _futex(window, ref)
    return WorkloadView(
        ref=ref,
        seconds=seconds,
        cpus_allowed=cpus_allowed(limit, (), node_cpus),
        cpu_limit_cores=None if limit is None or (node_cpus is not None and limit >= node_cpus) else limit,
        cpu_used_cores=used,
        system_share=share,
        threads=None if threads is None else int(threads),
        pool_workers=None if workers is None else int(workers),
        sched_yield_calls=window.delta(ref, metrics.SCHED_YIELD_CALLS),
        futex_calls=futex,
        futex_wait_seconds=window.delta(ref, metrics.FUTEX_WAIT_SECONDS),
        runqueue_wait_seconds=window.delta(ref, metrics.RUNQUEUE_WAIT_SECONDS),
        preempted_seconds=window.delta(ref, metrics.OFFCPU_SECONDS, "preempted"),
        throttled_periods=window.delta(ref, metrics.CPU_THROTTLED_PERIODS),
        periods=window.delta(ref, metrics.CPU_PERIODS),
        throttled_seconds=window.delta(ref, metrics.CPU_THROTTLED_SECONDS),
        voluntary_switches=switches(window, ref, "blocked"),
        involuntary_switches=switches(window, ref, "preempted"),
    )


def switches(window: Window, ref: Workload, reason: str) -> float | None:
    """The workload's off-CPU periods of *reason* that ended in the window: its voluntary (blocked) or involuntary
    (preempted) context switches. None where the agent does not count them (perf and procfs modes, an agent older
    than the series: no workload of the reading has one)."""
    if not window.after.has(metrics.OFFCPU_PERIODS):
        return None
    return window.delta(ref, metrics.OFFCPU_PERIODS, reason)


def _futex(window: Window, ref: Workload) -> dict[str, float] | None:
    if SYSCALLS_COLLECTOR not in window.after.up:
        return None
    calls: dict[str, float] = {}
    for op in syscalls.OPS.values:
        if window.after.lacks_value(ref, metrics.FUTEX_CALLS, op):
            return None
        after = window.after.count(ref, metrics.FUTEX_CALLS, op)
        before = window.before.count(window.earlier_ref(ref), metrics.FUTEX_CALLS, op)
        grown = (after or 0.0) - (before or 0.0)
        if grown < 0:
            return None  # the agent restarted between the readings
        if grown:
            calls[op] = grown
    return calls


def cpus_allowed(limit: float | None, affinity: tuple[int, ...], node_cpus: int | None) -> float | None:
    """CPUs a workload may use: the least of its CPU limit, the CPUs its processes may run on, the node's CPUs."""
    bounds = [float(bound) for bound in (limit, len(affinity) or None, node_cpus) if bound is not None]
    return min(bounds) if bounds else None


def workload_views(window: Window, node_cpus: int | None) -> list[WorkloadView]:
    """Every workload seen in the second reading, with its counts over the window."""
    return [workload_view(window, ref, node_cpus) for ref in window.after.workloads]


def changed_workloads(window: Window) -> list[Workload]:
    """The workloads of the second reading whose totals (counts and gauges) are not what the first reading had:
    every other one did nothing in the window, and its view would count nothing."""
    before = window.before.workloads
    changed = []
    for ref, totals in window.after.workloads.items():
        earlier = before.get(window.earlier_ref(ref))
        if earlier is not totals and earlier != totals:  # the same object: read from the same rows (FamiliesReader)
            changed.append(ref)
    return changed
