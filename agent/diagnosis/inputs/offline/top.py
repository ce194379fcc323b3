"""``top`` -> facts: the node's CPU states, load and running tasks, and the rows shown (processes, or threads
with ``top -H``)."""

from __future__ import annotations

from agent.diagnosis.facts import CpuShares, NodeView, ProcessView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.results import CpuStates, TopReport, TopRow, TopSnapshot
from agent.diagnosis.inputs.offline.part import Part

NO_CAUSE = "top shows where CPU time went, not why: a spinning thread pool and useful work look alike except for sy"
ROWS = "top's rows are what the screen showed (all processes, or those given with -p): not known to be one workload"
FIRST_REFRESH = "top printed one refresh: if it was `top -b -n 1`, its CPU line has no interval behind it"


def cpu_shares(states: CpuStates) -> CpuShares:
    """top's ``us sy ni id wa hi si st`` as the view's shares."""
    return CpuShares(
        user=states.us,
        nice=states.ni,
        system=states.sy,
        idle=states.id,
        iowait=states.wa,
        irq=states.hi,
        softirq=states.si,
        steal=states.st,
    )


def _process(row: TopRow) -> ProcessView:
    return ProcessView(pid=row.pid, comm=row.command, command=row.command, cpu_percent=row.cpu_percent)


def _thread(row: TopRow) -> ThreadView:
    return ThreadView(tid=row.pid, comm=row.command, cpu_percent=row.cpu_percent)


def _node(snapshot: TopSnapshot) -> NodeView:
    return NodeView(
        cpus=len(snapshot.per_cpu) or None,
        cpu=None if snapshot.cpu is None else cpu_shares(snapshot.cpu),
        run_queue=None if snapshot.tasks is None else float(snapshot.tasks.running),
        load_average=snapshot.load_average,
    )


def to_part(report: TopReport, source: str) -> Part:
    """The last refresh: in batch mode the first has no interval behind it."""
    snapshot = report.snapshots[-1]
    notes = [NO_CAUSE]
    workload: WorkloadView | None = None
    if snapshot.rows:
        notes.append(ROWS)
        if snapshot.threads_view:
            workload = WorkloadView(ref=Workload(), thread_views=tuple(_thread(row) for row in snapshot.rows))
        else:
            workload = WorkloadView(ref=Workload(), processes=tuple(_process(row) for row in snapshot.rows))
    if len(report.snapshots) == 1:
        notes.append(FIRST_REFRESH)
    return Part("top", source, _node(snapshot), workload, tuple(notes))
