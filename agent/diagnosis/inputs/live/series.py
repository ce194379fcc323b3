"""One reading of schedwatch's series, whatever served them, as per-workload totals.

The same parser reads metric families collected in this process and families parsed from a /metrics text: both
are prometheus_client ``Metric`` objects whose samples carry the full sample name (``_total``, ``_sum``).
A workload with no series of a running collector had no event of that kind: its count is 0. A collector that is
not running gives no count at all (None), never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from prometheus_client.core import Metric

from agent.diagnosis.facts import Workload
from agent.exposition.family import Family, HistogramFamily, RowFamily

# Sample name (and the label that splits it) -> the key of the total, and the collector that exports it.
COUNTERS: dict[str, tuple[str, str | None, str]] = {
    "schedwatch_sched_yield_calls_total": ("sched_yield_calls", None, "syscalls"),
    "schedwatch_futex_calls_total": ("futex_calls", "op", "syscalls"),
    "schedwatch_futex_wait_seconds_total": ("futex_wait_seconds", None, "syscalls"),
    "schedwatch_runqueue_latency_seconds_sum": ("runqueue_wait_seconds", None, "sched"),
    "schedwatch_runqueue_wait_seconds_total": ("runqueue_wait_seconds", None, "sched"),  # perf and procfs modes
    "schedwatch_offcpu_seconds_total": ("offcpu_seconds", "reason", "sched"),
    "schedwatch_cpu_periods_total": ("periods", None, "cgroup_cpu"),
    "schedwatch_cpu_throttled_periods_total": ("throttled_periods", None, "cgroup_cpu"),
    "schedwatch_cpu_throttled_seconds_total": ("throttled_seconds", None, "cgroup_cpu"),
    "schedwatch_cpu_usage_seconds_total": ("cpu_seconds", "mode", "cgroup_cpu"),
    # The time budget's inputs (inputs/live/budget_inputs.py turns them into the view's fields):
    "schedwatch_syscalls_total": ("syscall_calls", "family", "syscall_families"),
    "schedwatch_syscall_seconds_total": ("syscall_seconds", "family", "syscall_families"),
    "schedwatch_pressure_waiting_seconds_total": ("pressure_waiting", "resource", "pressure"),
    "schedwatch_pressure_stalled_seconds_total": ("pressure_stalled", "resource", "pressure"),
    "schedwatch_runqueue_wait_by_holder_seconds_total": ("waiting_by_holder", "holder", "sched"),
    "schedwatch_blocked_seconds_total": ("blocked", "state", "sched"),
    "schedwatch_runqueue_wait_by_neighbour_seconds_total": ("neighbour_wait", "neighbour", "sched"),
    "schedwatch_processes_exited_total": ("processes_exited", None, "sched"),
    "schedwatch_memory_events_total": ("memory_events", "event", "cgroup_memory"),
    "schedwatch_page_faults_total": ("page_faults", "kind", "cgroup_memory"),
    "schedwatch_memory_refaults_total": ("memory_refaults", None, "cgroup_memory"),
}
# Code attribution rows (agent/metrics.py CODE_LABELS): sample name -> (key, the labels naming a row, collector).
# A row's count is under "key:" + its label values joined by CODE_SEPARATOR (inputs/live/code_inputs.py reads them).
CODE_COUNTERS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "schedwatch_cpu_samples_total": ("cpu_samples", ("library", "version", "function", "mode"), "oncpu"),
    "schedwatch_sched_yield_calls_by_site_total": ("yield_sites", ("library", "version", "function"), "syscalls"),
    "schedwatch_futex_waits_by_site_total": ("futex_sites", ("library", "version", "function"), "syscalls"),
}
CODE_SEPARATOR = "\x1f"
GAUGES: dict[str, str] = {
    "schedwatch_cpu_limit_cores": "cpu_limit_cores",
    "schedwatch_threads": "threads",
    "schedwatch_syscall_timed": "syscall_timed",
    "schedwatch_pool_workers": "pool_workers",  # flagged workloads only
    "schedwatch_memory_limit_bytes": "memory_limit_bytes",  # limited workloads only
}
# Counts that are 0 for a workload without a series, as long as their collector runs.
ZERO_WHEN_ABSENT: dict[str, str] = {
    "sched_yield_calls": "syscalls",
    "futex_wait_seconds": "syscalls",
    "runqueue_wait_seconds": "sched",
    "offcpu_seconds:preempted": "sched",
    "processes_exited": "sched",
}
# Counts the agent's mode (schedwatch_mode, docs/modes.md) cannot give, though their collector runs: unknown there.
# A split count ("waiting_by_holder") stands for every one of its parts.
NOT_IN_MODE: dict[str, frozenset[str]] = {
    "perf": frozenset(
        {"futex_wait_seconds", "offcpu_seconds:preempted", "waiting_by_holder", "blocked", "neighbour_wait"}
    ),
    "procfs": frozenset(
        {"futex_wait_seconds", "offcpu_seconds:preempted", "waiting_by_holder", "blocked", "neighbour_wait"}
    ),
}
MODE = "schedwatch_mode"
BUILD_INFO = "schedwatch_build_info"
SOURCE_UP = "schedwatch_source_up"
WORKLOAD_LABELS = ("container_id", "container", "pod", "namespace", "cgroup")


class NotSchedwatch(ValueError):
    """The series read are not a schedwatch agent's."""


@dataclass
class WorkloadTotals:
    """Cumulative counts and current gauges of one workload at one reading."""

    counts: dict[str, float] = field(default_factory=dict)  # "sched_yield_calls", "futex_calls:wait", ...
    gauges: dict[str, float] = field(default_factory=dict)  # "cpu_limit_cores", "threads"
    no_value: set[str] = field(default_factory=set)  # counts whose series had no number (NaN): unknown, not 0


@dataclass(frozen=True)
class Reading:
    """schedwatch's series at one moment: which collectors ran, and every workload's totals."""

    at: float  # seconds on a monotonic clock (or the time series' timestamp)
    up: frozenset[str]  # collectors running
    workloads: dict[Workload, WorkloadTotals]
    unknown: frozenset[str] = frozenset()  # counts the agent's mode cannot give

    def count(self, ref: Workload, key: str) -> float | None:
        """A workload's cumulative count: its series, 0 when its running collector exported none, else None."""
        if self.lacks_value(ref, key):
            return None
        totals = self.workloads.get(ref)
        if totals is not None and key in totals.counts:
            return totals.counts[key]
        collector = ZERO_WHEN_ABSENT.get(key)
        return 0.0 if collector is not None and collector in self.up and key not in self.unknown else None

    @cached_property
    def kinds(self) -> frozenset[str]:
        """Every count any workload of the reading has, a split count by its name alone ("waiting_by_holder")."""
        return frozenset(key.split(":", 1)[0] for totals in self.workloads.values() for key in totals.counts)

    def lacks_value(self, ref: Workload, key: str) -> bool:
        """Whether a series of the workload's count was there without a number (a NaN from Prometheus)."""
        totals = self.workloads.get(ref)
        return totals is not None and key in totals.no_value


def ref_of(labels: dict[str, str]) -> Workload:
    """The workload a sample's labels name."""
    return Workload(*(labels.get(name, "") for name in WORKLOAD_LABELS))


def read_families(families: Iterable[Metric], at: float) -> Reading:
    """A Reading of metric families; NotSchedwatch when they hold no schedwatch_build_info."""
    up: set[str] = set()
    by_labels: dict[tuple[str, ...], WorkloadTotals] = {}  # a tuple hashes faster than a Workload per sample
    unknown: frozenset[str] = frozenset()
    agent = False
    for family in families:
        if isinstance(family, RowFamily) and not family.replaced and _read_rows(family, by_labels):
            continue
        for sample in family.samples:
            name = sample.name
            if name in COUNTERS or name in CODE_COUNTERS:
                if name in COUNTERS:
                    key, split, _collector = COUNTERS[name]
                    if split is not None:
                        key = f"{key}:{sample.labels.get(split, '')}"
                else:
                    prefix, row_labels, _collector = CODE_COUNTERS[name]
                    key = f"{prefix}:" + CODE_SEPARATOR.join(sample.labels.get(label, "") for label in row_labels)
                totals = _totals(by_labels, sample.labels)
                totals.counts[key] = totals.counts.get(key, 0.0) + sample.value
            elif name in GAUGES:
                _totals(by_labels, sample.labels).gauges[GAUGES[name]] = sample.value
            elif name == BUILD_INFO:
                agent = True
            elif name == MODE:
                unknown = NOT_IN_MODE.get(sample.labels.get("mode", ""), frozenset())
            elif name == SOURCE_UP and sample.value == 1:
                up.add(sample.labels.get("source", ""))
    if not agent:
        raise NotSchedwatch("no schedwatch_build_info series")
    workloads = {Workload(*values): totals for values, totals in by_labels.items()}
    return Reading(at, frozenset(up), merge_unnamed(workloads), unknown)


def _read_rows(family: RowFamily, by_labels: dict[tuple[str, ...], WorkloadTotals]) -> bool:
    """Take a workload family's rows as they are (no Sample objects); False for a family to read by its samples."""
    if isinstance(family, HistogramFamily):
        name, rows = family.name + "_sum", [(values, sum_value) for values, _les, _counts, sum_value in family.rows]
    elif isinstance(family, Family):
        name, rows = family.sample_name(), family.rows
    else:
        return False
    names = family.labelnames
    if name not in COUNTERS and name not in GAUGES and name not in CODE_COUNTERS:
        return name not in (BUILD_INFO, MODE, SOURCE_UP)  # not read at all, or read by its samples
    if names[: len(WORKLOAD_LABELS)] != WORKLOAD_LABELS:
        return False
    width = len(WORKLOAD_LABELS)
    if name in CODE_COUNTERS:
        prefix, row_labels, _collector = CODE_COUNTERS[name]
        at = [names.index(label) for label in row_labels]
        for values, value in rows:
            totals = _workload_totals(by_labels, values[:width])
            row_key = f"{prefix}:" + CODE_SEPARATOR.join(values[index] for index in at)
            totals.counts[row_key] = totals.counts.get(row_key, 0.0) + value
        return True
    if name in GAUGES:
        gauge = GAUGES[name]
        for values, value in rows:
            _workload_totals(by_labels, values[:width]).gauges[gauge] = value
        return True
    key, split, _collector = COUNTERS[name]
    split_at = names.index(split) if split is not None and split in names else None
    for values, value in rows:
        totals = _workload_totals(by_labels, values[:width])
        row_key = key if split is None else f"{key}:{values[split_at] if split_at is not None else ''}"
        totals.counts[row_key] = totals.counts.get(row_key, 0.0) + value
    return True


def _workload_totals(by_labels: dict[tuple[str, ...], WorkloadTotals], values: tuple[str, ...]) -> WorkloadTotals:
    totals = by_labels.get(values)
    if totals is None:
        totals = by_labels[values] = WorkloadTotals()
    return totals


def _totals(by_labels: dict[tuple[str, ...], WorkloadTotals], labels: dict[str, str]) -> WorkloadTotals:
    values = tuple(labels.get(name, "") for name in WORKLOAD_LABELS)
    totals = by_labels.get(values)
    if totals is None:
        totals = by_labels[values] = WorkloadTotals()
    return totals


def merge_unnamed(workloads: dict[Workload, WorkloadTotals]) -> dict[Workload, WorkloadTotals]:
    """Totals a container has under its id alone folded into its named totals.

    A container's names can arrive while the agent is collecting: then one scrape has one collector's series under
    the id alone and the next collector's under the names. They are one workload.
    """
    named = {ref.container_id: ref for ref in workloads if ref.container_id and (ref.container or ref.pod)}
    if not any(ref.container_id in named for ref in workloads if not (ref.container or ref.pod)):
        return workloads  # nothing to fold (the usual case)
    merged: dict[Workload, WorkloadTotals] = {}
    for ref, totals in workloads.items():
        target = named.get(ref.container_id, ref) if ref.container_id and not (ref.container or ref.pod) else ref
        into = merged.setdefault(target, WorkloadTotals())
        for key, value in totals.counts.items():
            into.counts[key] = into.counts.get(key, 0.0) + value
        into.no_value |= totals.no_value
        for key, value in totals.gauges.items():
            if target == ref or key not in into.gauges:
                into.gauges[key] = value
    return merged
