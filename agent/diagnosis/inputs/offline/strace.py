"""``strace -c`` -> facts: the workload's totals (strace sums every traced thread into one table)."""

from __future__ import annotations

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.results import StraceSummary
from agent.diagnosis.inputs.offline.known import seconds_by_call
from agent.diagnosis.inputs.offline.part import Part

KIND = "strace -c"
NO_THREADS = (
    "strace -c sums every traced thread into one table: it cannot say which threads yielded or waited, and "
    "without -f it follows only the first thread"
)
NO_CLOCK = "strace -c does not say how long it ran: rates are unknown, only counts"
CPU_OR_WALL = (
    "strace -c prints system CPU time, or wall-clock time with -w, and the table does not say which: "
    "its times are not read as futex wait time"
)
SLOWED = (
    "strace slows the loops it traces: a sched_yield storm shows about 10x fewer calls than it makes untraced "
    "(more on a quiet machine), so its counts are a floor"
)


def to_part(summary: StraceSummary, source: str) -> Part:
    """The traced workload's sched_yield count (0 when no table lists it: strace -c lists every call it saw)."""
    yields = sum(row.calls for table in summary.tables for row in table.syscalls if row.name == "sched_yield")
    per_call = seconds_by_call((row.name, row.total_ms / 1000.0) for table in summary.tables for row in table.syscalls)
    workload = WorkloadView(ref=Workload(), sched_yield_calls=float(yields), syscall_seconds=per_call)
    notes = [NO_CLOCK, NO_THREADS, CPU_OR_WALL]
    if yields:
        notes.append(SLOWED)
    return Part(KIND, source, NodeView(), workload, tuple(notes), untimed_counts=True)
