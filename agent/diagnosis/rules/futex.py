"""futex-contention: threads queue on one lock; each waits for the one holding it (a lock convoy)."""

from __future__ import annotations

from agent.diagnosis.facts import WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Finding, Mechanism, Unchecked
from agent.diagnosis.rules.common import COLLECT_LIVE, evidence, workload_finding
from agent.diagnosis.rules.fixes import convoy_fix
from agent.diagnosis.rules.signals import Signals
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATION = (
    "Threads of this workload block on futexes (the kernel side of mutexes and condition variables) many times a "
    "second and spend much of their time there: they queue on a lock held for long stretches, so they run one at "
    "a time whatever the CPUs."
)


def check(workload: WorkloadView, signals: Signals, limits: Thresholds) -> Finding | Unchecked | None:
    """The lock-convoy cause for one workload, or None."""
    waits, wakes, blocked = signals.futex_waits_per_second, signals.futex_wakes_per_second, signals.blocked_threads
    if waits is None or wakes is None or blocked is None:
        heavy = [thread for thread in workload.thread_views or () if (thread.futex_calls or 0) >= 10_000]
        if workload.seconds is None and heavy:
            return Unchecked(
                rule=Cause.FUTEX_CONTENTION,
                workload=workload.ref,
                missing=("how long the artifact covers (futex calls and waits per second)",),
                collect_next=(COLLECT_LIVE,),
            )
        return None
    if waits < limits.convoy_waits_per_second or wakes < limits.convoy_wakes_per_wait * waits:
        return None
    if workload.threads:
        if blocked / workload.threads < limits.convoy_blocked_share:
            return None
    elif blocked < limits.convoy_blocked_threads:
        return None
    found = (
        evidence("futex waits per second", waits, "/s", f"bar {limits.convoy_waits_per_second:g}"),
        evidence(
            "threads blocked in futex waits on average", blocked, "threads", f"bar {limits.convoy_blocked_threads:g}"
        ),
        evidence("futex wakes per wait", wakes / waits, "", "a lock handed from thread to thread: about 1"),
    )
    return workload_finding(
        workload,
        cause=Cause.FUTEX_CONTENTION,
        mechanism=Mechanism.LOCK_CONVOY,
        evidence=found,
        confidence=Confidence.HIGH if workload.processes is not None else Confidence.MEDIUM,
        fix=convoy_fix(),
        explanation=EXPLANATION,
    )
