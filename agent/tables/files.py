"""The tables of the collectors that read files and samples rather than a map of per-workload structs: cgroup_cpu
(cpu.stat, cpu.max and the cpuset of the workload's cgroups, v1's cpu and cpuacct), cgroup_memory (memory.max,
memory.events, memory.stat), pressure ({cpu,memory,io}.pressure, /proc/pressure) in every mode, and oncpu (on-CPU
samples named by library and function). Their collectors make each metric by their own code."""

from __future__ import annotations

from agent import metrics
from agent.bpf.probes.oncpu import OnCpuProbe
from agent.tables.rows import BPF, EVERY_MODE, Table

CGROUP_CPU = Table(
    "cgroup_cpu",
    EVERY_MODE,
    computed=(
        *(metrics.CPU_PERIODS, metrics.CPU_THROTTLED_PERIODS, metrics.CPU_THROTTLED_SECONDS),
        *(metrics.CPU_LIMIT_CORES, metrics.CPU_USAGE_SECONDS, metrics.THREADS),
    ),
)
CGROUP_MEMORY = Table(
    "cgroup_memory",
    EVERY_MODE,
    computed=(metrics.MEMORY_LIMIT_BYTES, metrics.MEMORY_EVENTS, metrics.PAGE_FAULTS, metrics.MEMORY_REFAULTS),
)
PRESSURE = Table(
    "pressure",
    EVERY_MODE,
    computed=(
        *(metrics.PRESSURE_WAITING_SECONDS, metrics.PRESSURE_STALLED_SECONDS),
        *(metrics.NODE_PRESSURE_WAITING_SECONDS, metrics.NODE_PRESSURE_STALLED_SECONDS),
    ),
)
ONCPU = Table("oncpu", (BPF,), OnCpuProbe.source, computed=(metrics.CPU_SAMPLES, metrics.CPU_SAMPLE_FREQUENCY))
