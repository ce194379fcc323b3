"""The syscalls collector's table: sched_yield and futex calls per workload (bpf/syscalls.bpf.c, map `cgroups`:
struct cgroup_stats; per live process, `processes`: struct process_stats), the call sites of the yields and futex
waits, and in perf mode the same calls from counting perf events."""

from __future__ import annotations

from agent import metrics
from agent.bpf.probes.syscalls import FUTEX_OPS, WAIT_BUCKET_BOUNDS, SyscallProbe
from agent.tables import rows
from agent.tables.rows import NS_PER_SECOND, U64, Bounded, Counter, Decoder, Histogram, Table

OPS = Decoder("op", FUTEX_OPS)

TABLE = Table(
    collector="syscalls",
    modes=(rows.BPF,),
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
    computed=(metrics.SCHED_YIELD_CALLS_BY_SITE, metrics.FUTEX_WAITS_BY_SITE),  # map `call_sites`, symbolized
    maps=(
        Bounded("cgroups", rows.CGROUPS, key_bytes=U64, other_bytes=U64),  # + sites_generation, count_sites (u32)
        Bounded("processes", rows.PROCESSES, key_bytes=4, other_bytes=U64),  # + cgroup_id
        Bounded("futex_start", rows.THREADS, key_bytes=4, value_bytes=U64),  # a futex wait in progress: its start
    ),
    activity=("yields", "futex_calls"),
)

# Perf mode: sched_yield and futex calls (and, with --perf-syscall-families, the families it can count exactly) from
# counting perf events of their tracepoints, per cgroup and CPU; and whether a workload's counts are all its own.
PERF_TABLE = Table(
    "syscalls",
    (rows.PERF,),
    computed=(metrics.SCHED_YIELD_CALLS, metrics.FUTEX_CALLS, metrics.SYSCALLS, metrics.PERF_COUNTS_EXACT),
)
