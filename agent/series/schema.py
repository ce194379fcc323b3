"""What each of schedwatch's sample names means to a reader, derived from agent/metrics.py and the collectors' tables
(agent/tables/): the metric a count is kept under, whether it is a count, a gauge or a histogram's bucket, whether it
is a workload's or a process's, and the labels that split it. Nothing here spells a metric's name.

A count is kept under its metric's name and a *part*: the values of the labels beyond the workload's (and the
process's), joined by PART ("" for a metric without such labels). A histogram counts its sum; where another mode
exports the same quantity as a counter (run-queue wait: the latency histogram's sum in bpf mode, a counter from
schedstat in perf and procfs modes), the sum is kept under that counter's name. A per-process series is kept under
the workload metric of the same field (metrics.PROCESS_FUTEX_CALLS under metrics.FUTEX_CALLS).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent import metrics
from agent.metrics import PROCESS_LABELS, WORKLOAD_LABELS, CounterSpec, GaugeSpec, HistogramSpec, MetricSpec
from agent.tables import TABLES, in_mode
from agent.tables.rows import BPF, EVERY_MODE, Histogram, Table

PART = "\x1f"  # joins the values of a series' labels beyond the workload's
COUNT, GAUGE, BUCKET = "count", "gauge", "bucket"
PROCESS_ONLY = tuple(label for label in PROCESS_LABELS if label not in WORKLOAD_LABELS)  # pid, comm


@dataclass(frozen=True)
class Role:
    """What the samples of one sample name are to a reader."""

    key: str  # the metric name the value is kept under
    kind: str  # COUNT, GAUGE or BUCKET
    parts: tuple[str, ...]  # the labels beyond the workload's (and the process's), in the metric's order
    process: bool  # a per-process series (its pid and comm label a process of the workload)


def sample_name(spec: MetricSpec) -> str:
    """The name a metric's series carry for what a reader counts: a counter's ``_total``, a histogram's ``_sum``."""
    if isinstance(spec, CounterSpec):
        return spec.name + "_total"
    if isinstance(spec, HistogramSpec):
        return spec.name + "_sum"
    return spec.name


def parts_of(spec: MetricSpec) -> tuple[str, ...]:
    """The labels of *spec* beyond the workload's and the process's: what splits its count."""
    return tuple(label for label in spec.labels if label not in WORKLOAD_LABELS and label not in PROCESS_ONLY)


def _sum_keys() -> dict[str, str]:
    """Histogram name -> the counter name its sum is kept under, where a table says another mode exports one."""
    return {
        row.spec.name: row.sum_is.name
        for table in TABLES
        for row in table.rows
        if isinstance(row, Histogram) and row.sum_is is not None
    }


def _process_keys() -> dict[str, str]:
    """Per-process metric name -> the workload key of the same field."""
    sums = _sum_keys()
    return {
        row.process.name: sums.get(row.spec.name, row.spec.name)
        for table in TABLES
        for row in table.rows
        if row.process is not None
    }


def _roles() -> dict[str, Role]:
    sums, processes = _sum_keys(), _process_keys()
    roles: dict[str, Role] = {}
    for spec in metrics.SPECS:
        if not set(WORKLOAD_LABELS) <= set(spec.labels):
            continue  # not a workload's series
        process = set(PROCESS_ONLY) <= set(spec.labels)
        key = processes.get(spec.name, spec.name) if process else spec.name
        if isinstance(spec, HistogramSpec):
            roles[spec.name + "_sum"] = Role(sums.get(spec.name, key), COUNT, parts_of(spec), process)
            roles[spec.name + "_bucket"] = Role(spec.name, BUCKET, parts_of(spec), process)  # under its own name
        elif isinstance(spec, GaugeSpec):
            roles[spec.name] = Role(key, GAUGE, parts_of(spec), process)
        else:
            roles[sample_name(spec)] = Role(key, COUNT, parts_of(spec), process)
    return roles


def _keys(tables: tuple[Table, ...], collector: str) -> set[str]:
    """The keys the *tables* of *collector* export (a histogram's under its sum's key)."""
    sums = _sum_keys()
    return {sums.get(spec.name, spec.name) for table in tables if table.collector == collector for spec in table.specs}


def _zero_when_absent() -> dict[str, str]:
    """Key -> its collector, for the counts a BPF program keeps per workload: a workload without the series had no
    event of that kind (its map has no entry, or the collector exports only what is not 0), as long as the collector
    runs."""
    sums = _sum_keys()
    return {
        sums.get(row.spec.name, row.spec.name): table.collector
        for table in TABLES
        if table.program is not None
        for row in table.rows
    }


def _unknown_in_mode() -> dict[str, frozenset[str]]:
    """Mode -> the keys that a collector running in that mode cannot give, though it gives them in bpf mode (its
    perf or procfs form reads another source): unknown there, never 0."""
    bpf = in_mode(BPF)
    unknown = {}
    for mode in EVERY_MODE:
        tables = in_mode(mode)
        collectors = {table.collector for table in tables}
        unknown[mode] = frozenset(
            key for collector in collectors for key in _keys(bpf, collector) - _keys(tables, collector)
        )
    return unknown


ROLES = _roles()  # by sample name
ZERO_WHEN_ABSENT = _zero_when_absent()
UNKNOWN_IN_MODE = _unknown_in_mode()
AGENT = metrics.BUILD_INFO.name  # the series that says the samples are a schedwatch agent's
MODE = metrics.MODE.name
SOURCE_UP = metrics.SOURCE_UP.name


_KEYS = {id(spec): ROLES[sample_name(spec)].key for spec in metrics.SPECS if sample_name(spec) in ROLES}


def key_of(spec: MetricSpec) -> str:
    """The key a reading keeps *spec*'s count under (a histogram: its sum's)."""
    return _KEYS[id(spec)]  # the specs are metrics.py's constants: by identity, without hashing one each call
