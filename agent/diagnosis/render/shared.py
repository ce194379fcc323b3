"""What the terminal and the page draw alike: how a workload is named, the order of workloads, findings, threads
and processes, which threads have nothing counted, the verdict, and a difference's cells."""

from __future__ import annotations

from collections.abc import Iterable

from agent.diagnosis.comparison import Difference
from agent.diagnosis.facts import CpuShares, ProcessView, ThreadView, Workload, WorkloadView
from agent.diagnosis.findings import Diagnosis, Finding
from agent.diagnosis.render.numbers import with_unit

UNNAMED = "unnamed workload (the artifacts name no container or cgroup)"
CPU_STATES = (  # CpuShares field, top's abbreviation
    ("user", "us"),
    ("system", "sy"),
    ("nice", "ni"),
    ("idle", "id"),
    ("iowait", "wa"),
    ("irq", "hi"),
    ("softirq", "si"),
    ("steal", "st"),
)


def workload_name(ref: Workload | None) -> str:
    """The workload as a person names it; artifacts that do not name it say so."""
    if ref is None or ref == Workload():
        return UNNAMED
    return ref.name


def where(ref: Workload | None) -> str:
    """Where a finding is, as its title says it: the workload's name, "" when the inputs name none."""
    name = workload_name(ref)
    return "" if name == UNNAMED else name


def cpu_states(shares: CpuShares) -> list[tuple[str, str, float]]:
    """The known states of *shares*, each as (name, top's abbreviation, percent), in top's order."""
    return [(name, short, value) for name, short in CPU_STATES if (value := getattr(shares, name)) is not None]


def rank_threads(threads: Iterable[ThreadView]) -> list[ThreadView]:
    """*threads*, most time in system calls first (sched_yield time when that is all there is), then most CPU."""
    return sorted(
        threads,
        key=lambda thread: (thread.syscall_seconds or thread.sched_yield_seconds or 0.0, thread.cpu_percent or 0.0),
        reverse=True,
    )


IDLE_SECONDS = 0.001  # less than the reports print as more than 0


def idle(thread: ThreadView) -> bool:
    """A thread with nothing counted: no sched_yield call, at most the one futex wait it is parked in, no time in
    system calls worth printing, no CPU; the reports fold such rows instead of drawing a line of zeros each."""
    calls = (thread.sched_yield_calls or 0) + max((thread.futex_calls or 0) - 1, 0)
    seconds = (thread.syscall_seconds or 0.0) + (thread.sched_yield_seconds or 0.0) + (thread.futex_seconds or 0.0)
    return not calls and seconds < IDLE_SECONDS and not thread.cpu_percent and not thread.system_percent


def rank_processes(processes: Iterable[ProcessView]) -> list[ProcessView]:
    """*processes*, most CPU first."""
    return sorted(processes, key=lambda process: process.cpu_percent or 0.0, reverse=True)


def rank_workloads(diagnosis: Diagnosis) -> list[WorkloadView]:
    """The workloads, those with a finding first, then by sched_yield calls, futex wait and CPU used."""
    flagged = {finding.workload for finding in diagnosis.findings}
    return sorted(
        diagnosis.facts.workloads,
        key=lambda w: (
            w.ref in flagged,
            w.sched_yield_calls or 0.0,
            w.futex_wait_seconds or 0.0,
            w.cpu_used_cores or 0.0,
        ),
        reverse=True,
    )


def rank_findings(diagnosis: Diagnosis) -> list[Finding]:
    """The findings in the order of their workloads (most contended first); those of no workload shown last."""
    order = {workload.ref: index for index, workload in enumerate(rank_workloads(diagnosis))}
    return sorted(diagnosis.findings, key=lambda finding: order.get(finding.workload, len(order)))


def named_workloads(diagnosis: Diagnosis) -> set[Workload | None]:
    """The workloads a finding, an undecided rule or an observation names: those whose time budget is drawn."""
    return (
        {finding.workload for finding in diagnosis.findings}
        | {unchecked.workload for unchecked in diagnosis.unchecked}
        | {observation.workload for observation in diagnosis.observations}
    )


def summary(diagnosis: Diagnosis) -> tuple[str, str]:
    """The one-line verdict and its tone ("bad", "unsure", "good")."""
    if diagnosis.findings:
        return plural_findings(len(diagnosis.findings)), "bad"
    if diagnosis.unchecked:
        rules = f"{len(diagnosis.unchecked):,} rule" + ("s" if len(diagnosis.unchecked) != 1 else "")
        return f"no finding, but {rules} could not decide: collect what they ask for", "unsure"
    return "no finding: no thread-contention cause in these facts", "good"


def plural_findings(count: int) -> str:
    """ "1 finding", "2 findings"."""
    return f"{count:,} finding" + ("s" if count != 1 else "")


def difference_cells(difference: Difference) -> tuple[str, str, str]:
    """A's value, B's value ("?" when unknown) and the ratio A / B ("" when there is none), as printed."""
    return (
        "?" if difference.a is None else with_unit(difference.a, difference.unit),
        "?" if difference.b is None else with_unit(difference.b, difference.unit),
        "" if difference.ratio is None else f"{difference.ratio:,.1f}x",
    )
