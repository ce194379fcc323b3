"""Facts -> findings. Pure functions of :class:`~agent.diagnosis.facts.Facts`: no file, no clock, no network.

Each cause has a module with a ``check(workload, ...)`` that answers a Finding, an Unchecked (facts missing) or None
(checked: not there). A pool finding explains a workload's run-queue wait and futex traffic, so saturation and
convoy are only named when no pool is; throttling explains run-queue wait too (a throttled thread is runnable), so
saturation is only named when the quota does not bite. A pool or a lock convoy also explains its threads' many
short sleeps and polls (hand-offs of work), so polling is only named without them; process churn explains the
mappings and page faults of the processes it starts, so allocator churn is only named without it; the quota explains
a throttled workload's wait, so steal is only named without throttling. What none of the causes names, with the time
budget known, is named unexplained.
"""

from __future__ import annotations

from agent.diagnosis.facts import Facts, WorkloadView
from agent.diagnosis.findings import Cause, Diagnosis, Finding, Unchecked
from agent.diagnosis.rules import (
    allocator,
    churn,
    clock,
    futex,
    memory,
    neighbour,
    next_steps,
    node,
    node_counters,
    polling,
    pool,
    runqueue,
    runqueue_waits,
    stacks,
    steal,
    throttling,
    unexplained,
)
from agent.diagnosis.rules.signals import signals
from agent.diagnosis.rules.thresholds import DEFAULT, Thresholds

__all__ = ["Thresholds", "diagnose"]
HAND_OFFS = {Cause.THREAD_POOL_OVERSUBSCRIPTION, Cause.FUTEX_CONTENTION}


def _other_causes(workload: WorkloadView, facts: Facts, limits: Thresholds, named: set[Cause]) -> list[Finding]:
    """The causes of issue 26 beside the thread-contention ones already *named* for the workload."""
    found = [clock.check(workload, facts.node, limits)]
    if not named & HAND_OFFS:
        found.append(polling.check(workload, limits))
    churned = churn.check(workload, limits)
    found.append(churned)
    if churned is None:
        found.append(allocator.check(workload, limits))
    found.append(neighbour.check(workload, limits))
    if Cause.CPU_THROTTLING not in named:  # a throttled thread waits for its quota, whoever runs the CPU
        found.append(steal.check(workload, facts.node, limits))
    found.append(memory.check(workload, limits))
    found.append(stacks.allocator_finding(workload, limits))
    return [finding for finding in found if finding is not None]


def _workload(workload: WorkloadView, facts: Facts, limits: Thresholds) -> list[Finding | Unchecked]:
    outcomes = _contention(workload, facts, limits)
    named = {outcome.cause for outcome in outcomes if isinstance(outcome, Finding)}
    outcomes += _other_causes(workload, facts, limits, named)
    if not any(isinstance(outcome, Finding) for outcome in outcomes):
        left = unexplained.check(workload, limits)
        if left is not None:
            outcomes.append(left)
    return outcomes


def _contention(workload: WorkloadView, facts: Facts, limits: Thresholds) -> list[Finding | Unchecked]:
    """The thread-contention causes: pools, lock convoys, saturation, the quota."""
    derived = signals(workload, facts.node, limits)
    outcomes: list[Finding | Unchecked] = []
    pool_outcome = pool.check(workload, derived, limits)
    if not isinstance(pool_outcome, Finding):  # the stacks may name the pool the counts could not
        pool_outcome = stacks.pool_finding(workload, facts.node, limits) or pool_outcome
    if pool_outcome is not None:
        outcomes.append(pool_outcome)
    pool_found = isinstance(pool_outcome, Finding)
    throttled = throttling.check(workload, derived, limits)
    if not pool_found:
        outcome = futex.check(workload, derived, limits)
        if not isinstance(outcome, Finding):
            outcome = stacks.convoy_finding(workload, limits) or outcome
        if outcome is not None:
            outcomes.append(outcome)
        # A throttled thread is runnable while the quota holds it back: that wait is the throttling's. And while
        # the pool rule could not check (libraries unknown), the wait may be a pool's: say what to collect instead.
        if throttled is None and pool_outcome is None:
            saturated = runqueue.check(workload, derived, limits) or runqueue_waits.check(workload, facts.node, limits)
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
    saturated = any(finding.cause is Cause.RUN_QUEUE_SATURATION for finding in findings)  # it says the waits
    observed = (
        node.observations(facts, findings, limits)
        + node_counters.observations(facts)
        + next_steps.observations(facts, findings)
        + (() if saturated else runqueue_waits.observations(facts, limits))
    )
    return Diagnosis(facts, findings, unchecked, observed)
