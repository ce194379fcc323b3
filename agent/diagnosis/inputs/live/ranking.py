"""How much contention a workload shows: each of its signals as a share of the rules' threshold for it.

The score is the strongest signal: 1 means a rule's threshold is reached. A workload is looked at closely (its
processes, maps and thread variables read) from FLAG_SCORE on, a bar well below the rules, so that a diagnosis
also sees what is building up; busy CPUs alone are no contention and flag nothing.
"""

from __future__ import annotations

from agent.diagnosis.facts import NodeView, WorkloadView
from agent.diagnosis.rules.signals import signals
from agent.diagnosis.rules.thresholds import DEFAULT, Thresholds
from agent.identity.workload import REMOVED, UNRESOLVED

FLAG_SCORE = 0.25  # e.g. 500 yields/s per CPU, 5 % of CFS periods throttled, 1/16 thread waiting per CPU
MAX_FLAGGED = 8  # workloads read closely at most, highest scores first
CATCH_ALL = (REMOVED.cgroup, UNRESOLVED.cgroup)  # counts no one cgroup holds: nothing to read closely or judge


def shares(view: WorkloadView, node: NodeView | None = None, limits: Thresholds = DEFAULT) -> dict[str, float]:
    """Each known signal of *view* over its threshold, by name."""
    derived = signals(view, node or NodeView(), limits)
    pairs = {
        "sched_yield per CPU": (derived.yields_per_cpu, limits.yields_per_cpu),
        "futex calls per CPU": (derived.futex_per_cpu, limits.futex_handoffs_per_cpu),
        "futex waits": (derived.futex_waits_per_second, limits.convoy_waits_per_second),
        "run-queue wait per CPU": (derived.runqueue_per_cpu, limits.runqueue_wait_per_cpu),
        "throttled periods": (derived.throttled_share, limits.throttled_share),
    }
    return {name: value / bar for name, (value, bar) in pairs.items() if value is not None and bar > 0}


def score(view: WorkloadView, node: NodeView | None = None) -> float:
    """The strongest signal of *view* over its threshold; 0 when nothing is known."""
    return max(shares(view, node).values(), default=0.0)
