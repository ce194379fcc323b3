"""What schedwatch exports, one row a metric: each collector's table (which map field or file feeds each metric,
with its labels' decoders), from which the collectors build their series, the reader of our own series
(agent/series/) knows them, the kernel memory of the --max-* flags is counted (kernel_memory) and docs/metrics.md's
table is checked. docs/metrics.md, "Adding a metric", says what a new counter takes.
"""

from __future__ import annotations

from agent import metrics
from agent.metrics import MetricSpec
from agent.tables import families, files, sched, syscalls
from agent.tables.rows import EVERY_MODE, Table

# The standing evaluation's series (agent/diagnosis/standing.py): the rules run on the collectors' series every 10 s
# or more, the pool workers of flagged workloads, the node's CPUs they count with.
DIAGNOSIS = Table("(diagnosis)", EVERY_MODE, computed=(metrics.FINDING, metrics.POOL_WORKERS, metrics.NODE_CPUS))
# Every collector's table, each form of a collector (its BPF program, or what perf and procfs modes read instead).
TABLES: tuple[Table, ...] = (
    syscalls.TABLE,
    sched.TABLE,
    families.TABLE,
    files.ONCPU,
    files.CGROUP_CPU,
    files.CGROUP_MEMORY,
    files.PRESSURE,
    syscalls.PERF_TABLE,
    sched.SCHEDSTAT_TABLE,
)
# The agent's own series: not about workloads (docs/metrics.md, "The agent's own series"; docs/modes.md).
AGENT: tuple[MetricSpec, ...] = (
    *(metrics.BUILD_INFO, metrics.SOURCE_UP, metrics.COLLECT_DURATION, metrics.MODE, metrics.BPF_STATS_ENABLED),
    *(metrics.BPF_PROGRAM_RUNS, metrics.BPF_PROGRAM_RUN_SECONDS, metrics.BPF_PROGRAM_MISSES),
    *(metrics.BPF_MAP_ENTRIES, metrics.BPF_MAP_MAX_ENTRIES, metrics.BPF_EVENTS_DROPPED, metrics.TRACKED_SERIES),
    *(metrics.SAMPLES_DROPPED, metrics.RUNTIME_LOOKUPS, metrics.WEB_CONNECTIONS_DROPPED, metrics.WEB_CONNECTIONS_OPEN),
    *(metrics.TASK_EXITS_UNRECORDED, metrics.PERF_COUNTERS_OPEN, metrics.PERF_CGROUPS_UNCOUNTED),
    *(metrics.PERF_COUNTER_OPEN_FAILURES, metrics.SOURCE_DEGRADED),
)


def in_mode(mode: str) -> tuple[Table, ...]:
    """The tables of the collectors that run in *mode* (bpf, perf, procfs)."""
    return tuple(table for table in TABLES if mode in table.modes)
