"""The tables of the collectors that read files and samples rather than a map of per-workload structs: cgroup_cpu,
cgroup_memory and pressure (cgroup and /proc files, in every mode) and oncpu (on-CPU samples, named by library and
function). Their collectors make each metric by their own code; the rows name the metric and where it comes from."""

from __future__ import annotations

from agent import metrics
from agent.bpf.probes.oncpu import OnCpuProbe
from agent.tables.rows import BPF, EVERY_MODE, Computed, Table

CGROUP_CPU = Table(
    collector="cgroup_cpu",
    modes=EVERY_MODE,
    computed=(
        Computed(metrics.CPU_PERIODS, "cpu.stat nr_periods (cgroup2, or the v1 cpu hierarchy)"),
        Computed(metrics.CPU_THROTTLED_PERIODS, "cpu.stat nr_throttled"),
        Computed(metrics.CPU_THROTTLED_SECONDS, "cpu.stat throttled_usec (v1: throttled_time)"),
        Computed(metrics.CPU_LIMIT_CORES, "cpu.max (v1: cfs_quota_us, cfs_period_us) over the ancestors, cpuset"),
        Computed(metrics.CPU_USAGE_SECONDS, "cpu.stat user_usec, system_usec (v1: cpuacct.stat)"),
        Computed(metrics.THREADS, "cgroup.threads of the workload's cgroups"),
    ),
)
CGROUP_MEMORY = Table(
    collector="cgroup_memory",
    modes=EVERY_MODE,
    computed=(
        Computed(metrics.MEMORY_LIMIT_BYTES, "memory.max (v1: memory.limit_in_bytes) over the ancestors"),
        Computed(metrics.MEMORY_EVENTS, "memory.events (v1: memory.failcnt, memory.oom_control)"),
        Computed(metrics.PAGE_FAULTS, "memory.stat pgfault, pgmajfault"),
        Computed(metrics.MEMORY_REFAULTS, "memory.stat workingset_refault_anon + workingset_refault_file"),
    ),
)
PRESSURE = Table(
    collector="pressure",
    modes=EVERY_MODE,
    computed=(
        Computed(metrics.PRESSURE_WAITING_SECONDS, "{cpu,memory,io}.pressure some total of the workload's cgroup"),
        Computed(metrics.PRESSURE_STALLED_SECONDS, "{cpu,memory,io}.pressure full total"),
        Computed(metrics.NODE_PRESSURE_WAITING_SECONDS, "/proc/pressure/{cpu,memory,io} some total"),
        Computed(metrics.NODE_PRESSURE_STALLED_SECONDS, "/proc/pressure/{cpu,memory,io} full total"),
    ),
)
ONCPU = Table(
    collector="oncpu",
    modes=(BPF,),
    program=OnCpuProbe.source,
    computed=(
        Computed(metrics.CPU_SAMPLES, "map `samples` (workload, process, address) -> count, named by the symbolizer"),
        Computed(metrics.CPU_SAMPLE_FREQUENCY, "--sample-frequency"),
    ),
)
