"""The syscalls collector's table: sched_yield and futex calls per workload (bpf/syscalls.bpf.c, map `cgroups`:
struct cgroup_stats; per live process, `processes`: struct process_stats), and in perf mode the same calls from
counting perf events."""

from __future__ import annotations

from agent import metrics
from agent.bpf.probes.syscalls import FUTEX_OPS, WAIT_BUCKET_BOUNDS, SyscallProbe
from agent.tables.rows import (
    BPF,
    CGROUPS,
    NS_PER_SECOND,
    PERF,
    PROCESSES,
    THREADS,
    U64,
    Bounded,
    Computed,
    Counter,
    Decoder,
    Histogram,
    Table,
)

OPS = Decoder("op", FUTEX_OPS)

TABLE = Table(
    collector="syscalls",
    modes=(BPF,),
    program=SyscallProbe.source,
    rows=(
        Counter(metrics.SCHED_YIELD_CALLS, "yields", process=metrics.PROCESS_SCHED_YIELD_CALLS),
        Counter(metrics.FUTEX_CALLS, "futex_calls", OPS, process=metrics.PROCESS_FUTEX_CALLS),
        Counter(
            metrics.FUTEX_WAIT_SECONDS,
            "futex_wait_ns",
            divisor=NS_PER_SECOND,
            process=metrics.PROCESS_FUTEX_WAIT_SECONDS,
        ),
        Histogram(
            metrics.FUTEX_WAIT_DURATION, "futex_wait_buckets", WAIT_BUCKET_BOUNDS, "futex_wait_ns", NS_PER_SECOND
        ),
    ),
    maps=(
        Bounded("cgroups", CGROUPS, key_bytes=U64),
        Bounded("processes", PROCESSES, key_bytes=4, other_bytes=U64),  # + cgroup_id
        Bounded("futex_start", THREADS, key_bytes=4, value_bytes=U64),  # a futex wait in progress: when it began
    ),
    activity=("yields", "futex_calls"),
)

PERF_TABLE = Table(
    collector="syscalls",
    modes=(PERF,),
    computed=(
        Computed(
            metrics.SCHED_YIELD_CALLS, "a counting perf event of syscalls:sys_enter_sched_yield per cgroup and CPU"
        ),
        Computed(metrics.FUTEX_CALLS, "counting perf events of syscalls:sys_enter_futex (and futex2) by op"),
        Computed(metrics.SYSCALLS, "with --perf-syscall-families, counting perf events of the families it can count"),
    ),
)
