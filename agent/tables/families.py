"""The syscall_families collector's table: every workload's system calls by family and the time inside them
(bpf/families.bpf.c, map `cgroups`: struct workload_syscalls)."""

from __future__ import annotations

from agent import metrics
from agent.bpf.probes.families import FamiliesProbe
from agent.machine.syscall_families import FAMILIES
from agent.tables import rows
from agent.tables.rows import NS_PER_SECOND, U64, Bounded, Counter, Decoder, Table

FAMILY = Decoder("family", FAMILIES)

TABLE = Table(
    collector="syscall_families",
    modes=(rows.BPF,),
    program=FamiliesProbe.source,
    rows=(
        Counter(metrics.SYSCALLS, "calls", FAMILY, only_nonzero=True),
        Counter(metrics.SYSCALL_SECONDS, "ns", FAMILY, NS_PER_SECOND, only_nonzero=True),
    ),
    computed=(metrics.SYSCALL_TIMED,),  # the workloads timed since the last scrape (map `timed_workloads`)
    maps=(
        Bounded("cgroups", rows.CGROUPS, key_bytes=U64, other_bytes=U64),  # + timing_generation, timed (u32 each)
        Bounded("calls_in_progress", rows.THREADS, key_bytes=4, value_bytes=24),  # struct call_in_progress
        Bounded("timed_workloads", rows.TIMED, key_bytes=U64, value_bytes=1),
    ),
)
