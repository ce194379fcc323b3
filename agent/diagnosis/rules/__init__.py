"""Facts -> findings. Pure functions of :class:`~agent.diagnosis.facts.Facts`: no file, no clock, no network.

Each cause has a module with a ``check(workload, signals, thresholds)`` that answers a Finding, an Unchecked
(facts missing) or None (checked: not there). A pool finding explains a workload's run-queue wait and futex
traffic, so saturation and convoy are only named when no pool is; throttling explains run-queue wait too (a
throttled thread is runnable), so saturation is only named when the quota does not bite.
"""

from __future__ import annotations

from agent.diagnosis.facts import Facts, WorkloadView
from agent.diagnosis.findings import Cause, Diagnosis, Finding, Unchecked
from agent.diagnosis.rules import futex, next_steps, node, node_counters, pool, runqueue, throttling
from agent.diagnosis.rules.signals import signals
from agent.diagnosis.rules.thresholds import DEFAULT, Thresholds

__all__ = ["Thresholds", "diagnose"]


def _workload(workload: WorkloadView, facts: Facts, limits: Thresholds) -> list[Finding | Unchecked]:
    derived = signals(workload, facts.node, limits)
    outcomes: list[Finding | Unchecked] = []
    pool_outcome = pool.check(workload, derived, limits)
    if pool_outcome is not None:
        outcomes.append(pool_outcome)
    pool_found = isinstance(pool_outcome, Finding)
    throttled = throttling.check(workload, derived, limits)
    if not pool_found:
        outcome = futex.check(workload, derived, limits)
        if outcome is not None:
            outcomes.append(outcome)
        # A throttled thread is runnable while the quota holds it back: that wait is the throttling's. And while
        # the pool rule could not check (libraries unknown), the wait may be a pool's: say what to collect instead.
        if throttled is None and pool_outcome is None:
            saturated = runqueue.check(workload, derived, limits)
            if saturated is not None:
                outcomes.append(saturated)
    if throttled is not None:
        outcomes.append(throttled)
    return outcomes


def diagnose(facts: Facts, limits: Thresholds = DEFAULT) -> Diagnosis:
    """Every finding, unchecked rule and observation for *facts*, findings in order of cause then workload."""
    outcomes = [outcome for workload in facts.workloads for outcome in _workload(workload, facts, limits)]
    order = list(Cause)
    findings = tuple(
        sorted(
            (outcome for outcome in outcomes if isinstance(outcome, Finding)),
            key=lambda finding: (order.index(finding.cause), finding.workload.name),
        )
    )
    unchecked = tuple(outcome for outcome in outcomes if isinstance(outcome, Unchecked))
    observed = (
        node.observations(facts, findings, limits)
        + node_counters.observations(facts)
        + next_steps.observations(facts, findings)
    )
    return Diagnosis(facts, findings, unchecked, observed)
