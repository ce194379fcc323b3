"""``perf trace -s`` -> facts: one thread view per thread block, the workload's totals summed over them."""

from __future__ import annotations

from agent.diagnosis.facts import NodeView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.results import PerfTraceSummary, ThreadSyscalls
from agent.diagnosis.inputs.offline.known import seconds_by_call, sum_known
from agent.diagnosis.inputs.offline.part import Part

KIND = "perf trace -s"
NO_CLOCK = "perf trace -s does not say how long it ran: rates (calls per second) are unknown, only counts and times"
SLOWED = (
    "perf trace slows the loops it traces: a sched_yield storm shows 10-30x fewer calls than it makes untraced, "
    "so its counts are a floor"
)
NO_OPS = (
    "perf trace -s does not split futex calls by operation (wait, wake); their time is mostly time waiting, "
    "and it names threads, not the processes they belong to"
)


def _seconds(milliseconds: float) -> float:
    return milliseconds / 1000.0


def thread_view(block: ThreadSyscalls) -> ThreadView:
    """One thread's block: a thread that made no such call made 0 (perf trace sees every system call of a thread);
    a block whose table is empty (perf 6.1 with ``-F``) tells no counts at all."""
    if not block.syscalls:
        return ThreadView(tid=block.tid, comm=block.comm)
    yields = block.syscall("sched_yield")
    futex = block.syscall("futex")
    return ThreadView(
        tid=block.tid,
        comm=block.comm,
        sched_yield_calls=yields.calls if yields else 0,
        sched_yield_seconds=_seconds(yields.total_ms) if yields else 0.0,
        futex_calls=futex.calls if futex else 0,
        futex_seconds=_seconds(futex.total_ms) if futex else 0.0,
        futex_max_seconds=None if futex is None or futex.max_ms is None else _seconds(futex.max_ms),
        syscall_seconds=_seconds(sum(stat.total_ms for stat in block.syscalls)),
    )


def to_part(summary: PerfTraceSummary, source: str) -> Part:
    """The workload that perf traced: its threads and their sums."""
    threads = tuple(thread_view(block) for block in summary.threads)
    yields = sum_known(thread.sched_yield_calls for thread in threads)
    workload = WorkloadView(
        ref=Workload(),
        threads=len(threads),
        sched_yield_calls=yields,
        futex_wait_seconds=sum_known(thread.futex_seconds for thread in threads),
        syscall_seconds=seconds_by_call(
            (stat.name, _seconds(stat.total_ms)) for block in summary.threads for stat in block.syscalls
        ),
        thread_views=threads,
    )
    notes = [NO_CLOCK, NO_OPS]
    if yields:
        notes.append(SLOWED)
    if summary.lost_events:
        notes.append(
            f"perf trace lost {summary.lost_events:,} events (its buffer was full): its counts are lower still; "
            "`perf trace -m 64M` gives it a larger buffer"
        )
    if any(thread.sched_yield_calls is None for thread in threads):
        notes.append("some perf trace blocks have an empty table (perf with -F): their calls are unknown")
    return Part(KIND, source, NodeView(), workload, tuple(notes), untimed_counts=True)
