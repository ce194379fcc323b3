"""cpu-throttling: the CFS quota stops the workload's threads in most periods."""

from __future__ import annotations

from agent.diagnosis.facts import WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Finding, Mechanism
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.fixes import throttling_fix
from agent.diagnosis.rules.signals import Signals
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATION = (
    "The workload's CPU limit (CFS quota) runs out before most scheduling periods end; then all its threads are "
    "stopped until the next period, so requests and batches stall even when the node has idle CPUs."
)


def check(workload: WorkloadView, signals: Signals, limits: Thresholds) -> Finding | None:
    """The throttling cause for one workload, or None."""
    share = signals.throttled_share
    if share is None or share < limits.throttled_share or (workload.periods or 0) < limits.throttled_min_periods:
        return None
    found = [
        evidence("CFS periods throttled", 100 * share, "%", f"bar {100 * limits.throttled_share:.0f} %"),
    ]
    demand = None
    if workload.cpu_used_cores is not None:
        demand = workload.cpu_used_cores
        throttled_rate = workload.rate(workload.throttled_seconds)
        if throttled_rate is not None:
            found.append(evidence("time throttled per second", throttled_rate, "s/s", "0 when the quota fits"))
            demand += throttled_rate
        if workload.cpu_limit_cores is not None:
            found.append(
                evidence("CPU used", workload.cpu_used_cores, "CPUs", f"its limit: {workload.cpu_limit_cores:g} CPUs")
            )
    return workload_finding(
        workload,
        cause=Cause.CPU_THROTTLING,
        mechanism=Mechanism.QUOTA,
        evidence=tuple(found),
        confidence=Confidence.HIGH if workload.cpu_limit_cores is not None else Confidence.MEDIUM,
        fix=throttling_fix(workload.cpu_limit_cores, demand),
        explanation=EXPLANATION,
    )
