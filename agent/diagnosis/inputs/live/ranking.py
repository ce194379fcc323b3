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
    calls = view.syscall_calls_by_family or {}
    events = view.memory_events or {}
    pairs = {
        "sched_yield per CPU": (derived.yields_per_cpu, limits.yields_per_cpu),
        "futex calls per CPU": (derived.futex_per_cpu, limits.futex_handoffs_per_cpu),
        "futex waits": (derived.futex_waits_per_second, limits.convoy_waits_per_second),
        "run-queue wait per CPU": (derived.runqueue_per_cpu, limits.runqueue_wait_per_cpu),
        "throttled periods": (derived.throttled_share, limits.throttled_share),
        # The other causes' signals (their rules add conditions; a score only decides who is looked at closely).
        "clock calls": (view.rate(calls.get("clock")), limits.clock_calls_per_second),
        "sleeps and polls": (
            view.rate(calls.get("sleep", 0.0) + calls.get("poll", 0.0)) if calls else None,
            limits.polling_calls_per_second,
        ),
        "processes exited": (view.rate(view.processes_exited), limits.churn_exits_per_second),
        "page faults": (view.rate(view.page_faults), limits.alloc_faults_per_second),
        "waiting for other workloads": (
            view.rate((view.waiting_by_holder or {}).get("other")),
            limits.neighbour_wait_per_second,
        ),
        "memory limit hits": (
            view.rate(events.get("max", 0.0) + events.get("high", 0.0) + events.get("oom_kill", 0.0))
            if view.memory_events is not None
            else None,
            limits.memory_limit_hits_per_second,
        ),
        "kernel CPU": (
            view.rate(view.system_seconds)
            if (view.system_share or 0.0) >= limits.unexplained_system_share
            else None,  # a busy workload's usual kernel share is no signal
            limits.unexplained_system_cores,
        ),
    }
    return {name: value / bar for name, (value, bar) in pairs.items() if value is not None and bar > 0}


def score(view: WorkloadView, node: NodeView | None = None) -> float:
    """The strongest signal of *view* over its threshold; 0 when nothing is known."""
    return max(shares(view, node).values(), default=0.0)
