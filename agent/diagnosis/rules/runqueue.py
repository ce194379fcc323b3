"""run-queue-saturation: more runnable threads than CPUs, no thread pool behind it."""

from __future__ import annotations

from agent.diagnosis.findings import Cause, Confidence, Finding, Mechanism
from agent.diagnosis.rules.common import COLLECT_LIVE, COLLECT_MAPS, evidence
from agent.diagnosis.rules.fixes import runqueue_fix
from agent.diagnosis.rules.signals import Signals
from agent.diagnosis.rules.thresholds import Thresholds
from agent.diagnosis.views import WorkloadView

EXPLANATION = (
    "More threads of this workload want to run than it has CPUs: each waits in the run queue for a turn, so work "
    "takes longer than its CPU time. No thread pool is behind it: the workload simply runs more CPU-bound workers "
    "than CPUs."
)


def check(workload: WorkloadView, signals: Signals, limits: Thresholds) -> Finding | None:
    """The saturation cause for one workload, or None."""
    waiting, busy = signals.runqueue_per_cpu, signals.busy_share
    if waiting is None or waiting < limits.runqueue_wait_per_cpu or busy is None or busy < limits.busy_share:
        return None
    wanted = None
    if workload.cpu_used_cores is not None and workload.runqueue_wait_seconds is not None and workload.seconds:
        wanted = workload.cpu_used_cores + workload.runqueue_wait_seconds / workload.seconds
    found = [
        evidence("run-queue wait per CPU", waiting, "s/s", f"bar {limits.runqueue_wait_per_cpu:g}"),
        evidence("CPU used / CPUs it may use", 100 * busy, "%", f"busy from {100 * limits.busy_share:.0f} %"),
    ]
    if wanted is not None and signals.cpus is not None:
        found.append(
            evidence("threads wanting a CPU on average", wanted, "threads", f"CPUs it may use: {signals.cpus:g}")
        )
    return Finding(
        cause=Cause.RUN_QUEUE_SATURATION,
        mechanism=Mechanism.TOO_MANY_RUNNABLE,
        workload=workload.ref,
        processes=tuple(process.pid for process in workload.processes or ()),
        libraries=(),
        evidence=tuple(found),
        confidence=Confidence.HIGH if workload.libraries is not None else Confidence.LOW,
        fix=runqueue_fix(signals.cpus, wanted),
        explanation=EXPLANATION,
        collect_next=() if workload.libraries is not None else (COLLECT_LIVE, COLLECT_MAPS),
    )
