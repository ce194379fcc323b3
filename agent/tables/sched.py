"""The sched collector's table: off-CPU time, run-queue latency (and its split by holder), blocked time and processes
exited per workload (bpf/sched.bpf.c, map `cgroups`: struct cgroup_sched; per live process, `processes`: struct
process_sched), and in perf and procfs modes run-queue wait and CPU time from each thread's schedstat."""

from __future__ import annotations

from agent import metrics
from agent.bpf.probes.sched import (
    HOLDERS,
    MISSED_EVENTS,
    NEIGHBOUR_PAIRS_PER_CGROUP,
    OFFCPU_REASONS,
    RUNQ_BUCKET_BOUNDS,
    SLEEPS,
    SchedProbe,
)
from agent.tables import rows
from agent.tables.rows import NS_PER_SECOND, U64, Bounded, Counter, Decoder, Histogram, Table

TABLE = Table(
    collector="sched",
    modes=(rows.BPF,),
    program=SchedProbe.source,
    rows=(
        Counter(
            metrics.OFFCPU_SECONDS,
            "offcpu_ns",
            Decoder("reason", OFFCPU_REASONS),
            NS_PER_SECOND,
            process=metrics.PROCESS_OFFCPU_SECONDS,
        ),
        Histogram(
            metrics.RUNQUEUE_LATENCY,
            "runq_buckets",
            RUNQ_BUCKET_BOUNDS,
            "runq_ns",
            NS_PER_SECOND,
            process=metrics.PROCESS_RUNQUEUE_WAIT_SECONDS,
            sum_is=metrics.RUNQUEUE_WAIT_SECONDS,
        ),
        Counter(metrics.SCHED_EVENTS_MISSED, "missed", Decoder("event", MISSED_EVENTS), only_nonzero=True),
        Counter(
            metrics.RUNQUEUE_WAIT_BY_HOLDER_SECONDS,
            "runq_by_holder_ns",
            Decoder("holder", HOLDERS),
            NS_PER_SECOND,
            process=metrics.PROCESS_RUNQUEUE_WAIT_BY_HOLDER_SECONDS,
        ),
        Counter(
            metrics.BLOCKED_SECONDS,
            "blocked_ns",
            Decoder("state", SLEEPS),
            NS_PER_SECOND,
            process=metrics.PROCESS_BLOCKED_SECONDS,
        ),
        Counter(metrics.PROCESSES_EXITED, "processes_exited", only_nonzero=True),
        Counter(metrics.OFFCPU_PERIODS, "offcpu_periods", Decoder("reason", OFFCPU_REASONS)),
    ),
    # map `neighbours`: (waiting workload, holding workload) -> nanoseconds, ranked per workload
    computed=(metrics.RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS,),
    maps=(
        Bounded("cgroups", rows.CGROUPS, key_bytes=U64),
        Bounded("workload_slots", rows.CGROUPS, key_bytes=4, value_bytes=U64 + 23 * U64, array=True),  # key, totals
        Bounded("forgotten_keys", rows.CGROUPS, key_bytes=U64, value_bytes=1),
        Bounded("processes", rows.PROCESSES, key_bytes=4, other_bytes=2 * U64),  # + cgroup_id, runq_waits
        Bounded("thread_slots", rows.THREADS, key_bytes=4, value_bytes=48, array=True),  # struct thread_slot
        Bounded("threads", rows.THREADS, key_bytes=4, value_bytes=40),  # struct thread_state
        # struct neighbour_pair -> struct neighbour_wait, an LRU map
        Bounded("neighbours", rows.CGROUPS, key_bytes=2 * U64, value_bytes=2 * U64, times=NEIGHBOUR_PAIRS_PER_CGROUP),
    ),
    activity=("runq_ns",),
)

# Perf and procfs modes: run-queue wait and time on CPU from each thread's /proc/TID/schedstat, summed per workload.
SCHEDSTAT_TABLE = Table(
    "sched", (rows.PERF, rows.PROCFS), computed=(metrics.RUNQUEUE_WAIT_SECONDS, metrics.ONCPU_SECONDS)
)
