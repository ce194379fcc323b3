"""The syscall_families collector's table: every workload's system calls by family and the time inside them
(bpf/families.bpf.c, map `cgroups`: struct workload_syscalls), processes exited, and the call sites of yields and
futex waits."""

from __future__ import annotations

from agent import metrics
from agent.bpf.probes.families import FamiliesProbe
from agent.machine.syscall_families import FAMILIES
from agent.tables.rows import (
    BPF,
    CGROUPS,
    NS_PER_SECOND,
    THREADS,
    TIMED,
    U64,
    Bounded,
    Computed,
    Counter,
    Decoder,
    Table,
)

FAMILY = Decoder("family", FAMILIES)

TABLE = Table(
    collector="syscall_families",
    modes=(BPF,),
    program=FamiliesProbe.source,
    rows=(
        Counter(metrics.SYSCALLS, "calls", FAMILY, only_nonzero=True),
        Counter(metrics.SYSCALL_SECONDS, "ns", FAMILY, NS_PER_SECOND, only_nonzero=True),
        Counter(metrics.PROCESSES_EXITED, "processes_exited", only_nonzero=True),
    ),
    computed=(
        Computed(metrics.SYSCALL_TIMED, "the workloads timed since the last scrape (map `timed_workloads`)"),
        Computed(metrics.SCHED_YIELD_CALLS_BY_SITE, "map `call_sites`, kind sched_yield, named by the symbolizer"),
        Computed(metrics.FUTEX_WAITS_BY_SITE, "map `call_sites`, kind futex_wait, named by the symbolizer"),
    ),
    maps=(
        Bounded("cgroups", CGROUPS, key_bytes=U64, other_bytes=U64),  # + timing_generation, timed (u32 each)
        Bounded("calls_in_progress", THREADS, key_bytes=4, value_bytes=24),  # struct call_in_progress
        Bounded("timed_workloads", TIMED, key_bytes=U64, value_bytes=1),
    ),
)
