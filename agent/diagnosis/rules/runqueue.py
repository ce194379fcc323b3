"""run-queue-saturation: more runnable threads than CPUs, no thread pool behind it."""

from __future__ import annotations

from agent.diagnosis.facts import WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Finding, Mechanism
from agent.diagnosis.rules.common import evidence
from agent.diagnosis.rules.fixes import runqueue_fix
from agent.diagnosis.rules.signals import Signals
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATION = (
    "More threads of this workload want to run than it has CPUs: each waits in the run queue for a turn, so work "
    "takes longer than its CPU time. No thread pool is behind it: the workload simply runs more CPU-bound workers "
    "than CPUs."
)


def check(workload: WorkloadView, signals: Signals, limits: Thresholds) -> Finding | None:
    """The saturation cause for one workload, or None."""
    waiting, cpus = signals.runqueue_per_cpu, signals.cpus
    if waiting is None or waiting < limits.runqueue_wait_per_cpu or not cpus:
        return None
    if workload.cpu_used_cores is None or workload.runqueue_wait_seconds is None or not workload.seconds:
        return None
    # Threads that wanted a CPU on average: those running plus those waiting. CPU-bound threads always want
    # one, however busy the node is; threads that also sleep or wait for their parent want one part of the time.
    wanted = workload.cpu_used_cores + workload.runqueue_wait_seconds / workload.seconds
    if wanted < limits.wanted_per_cpu * cpus or (signals.busy_share or 0.0) < limits.busy_share:
        return None
    found = [
        evidence("threads wanting a CPU on average", wanted, "threads", f"CPUs it may use: {cpus:g}"),
        evidence("run-queue wait per CPU", waiting, "s/s", f"bar {limits.runqueue_wait_per_cpu:g}"),
    ]
    if signals.busy_share is not None:
        found.append(
            evidence(
                "CPU used / CPUs it may use", 100 * signals.busy_share, "%", f"from {100 * limits.busy_share:.0f} %"
            )
        )
    return Finding(
        cause=Cause.RUN_QUEUE_SATURATION,
        mechanism=Mechanism.TOO_MANY_RUNNABLE,
        workload=workload.ref,
        processes=tuple(process.pid for process in workload.processes or ()),
        libraries=(),
        evidence=tuple(found),
        confidence=Confidence.HIGH,
        fix=runqueue_fix(cpus, wanted),
        explanation=EXPLANATION,
    )
