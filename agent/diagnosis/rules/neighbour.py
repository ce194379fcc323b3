"""noisy-neighbour: the workload's threads wait for CPUs that another workload holds, most of their wait.

Told by the wait for a CPU split by who held it (the sched program gives each wait to the task the CPU switched
from): "other" most of it, a real share of the time it ran, and which workloads those were (the neighbours split).
The wait is judged against the workload's own CPU: a tenth of a thread waiting on average, or, for a light workload,
waiting for others at least as long as it ran.
Waits behind its own threads are its own doing (a pool, saturation); waits behind an empty CPU are the quota's.
"""

from __future__ import annotations

from agent.diagnosis.facts import WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.thresholds import Thresholds

NAMED = 3  # neighbours named in the evidence


def shown(name: str) -> str:
    """A neighbour as a person reads it: the root cgroup holds the node's processes outside any workload."""
    return "processes in the root cgroup (outside any container)" if name == "/" else name


EXPLANATION = (
    "The workload's threads are runnable but wait for a CPU, and most of that wait the CPU is held by another "
    "workload on the node: it shares CPUs with a busier neighbour, which its own settings cannot fix."
)


def neighbour_fix(neighbour: str | None, share: float | None, waiting: float) -> Fix:
    """Separate the two workloads' CPUs, limit the neighbour, or move."""
    who = neighbour or "the other workloads on its CPUs"
    caused = f" ({100 * share:.0f} % of its wait for others)" if share is not None else ""
    return Fix(
        summary=f"Keep {who}{caused} off this workload's CPUs: its threads wait {waiting:.2f} s per second for CPUs "
        "held by it.",
        steps=(
            f"Limit {who}: a CPU limit (Kubernetes resources.limits.cpu, Docker --cpus) or fewer threads.",
            "Or give this workload CPUs of its own: Kubernetes Guaranteed QoS with whole CPUs and the static CPU "
            "manager policy, or a cpuset (Docker --cpuset-cpus) that the neighbour does not share.",
            "Or move one of them to another node (anti-affinity).",
        ),
    )


def check(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """The noisy-neighbour cause for one workload, or None (also when the wait by holder is unknown)."""
    holders, total = workload.waiting_by_holder, workload.runqueue_wait_seconds
    if holders is None or total is None or not workload.seconds or total <= 0:
        return None
    other = holders.get("other", 0.0)
    waiting = other / workload.seconds
    ran = workload.cpu_used_cores
    if other / total < limits.neighbour_share:
        return None
    # Judged against what the workload ran and wanted: a light, latency-sensitive workload that waits for others as
    # long as it runs is delayed as much, relatively, as a busy one waiting a tenth of a second each second.
    light = ran is not None and ran > 0 and waiting >= limits.neighbour_wait_floor
    relative = light and ran is not None and waiting / ran >= limits.neighbour_wait_relative
    if waiting < limits.neighbour_wait_per_second and not relative:
        return None
    if ran is not None and ran > 0 and waiting / ran < limits.neighbour_wait_to_cpu:
        return None
    found: list[Evidence] = [
        evidence(
            "threads waiting for CPUs held by other workloads, on average",
            waiting,
            "threads",
            f"bar {limits.neighbour_wait_per_second:g}, or as long as it ran (from {limits.neighbour_wait_floor:g})",
        ),
        evidence(
            "share of its wait for a CPU held by other workloads",
            100 * other / total,
            "%",
            f"bar {100 * limits.neighbour_share:g} %; its own threads and the kernel hold the rest",
        ),
    ]
    if ran is not None:
        found.append(evidence("CPU it used", ran, "CPUs", "it waited for others this long per second of it"))
    named = [(name, seconds) for name, seconds in workload.neighbours or () if seconds > 0][:NAMED]
    for name, seconds in named:
        found.append(
            evidence(
                f"its wait held by {shown(name)}",
                100 * seconds / other,
                "%",
                "of its wait for other workloads",
            )
        )
    top = named[0] if named and named[0][1] / other >= limits.neighbour_named_share else None
    return workload_finding(
        workload,
        cause=Cause.NOISY_NEIGHBOUR,
        mechanism=Mechanism.CPU_HELD_BY_NEIGHBOUR,
        evidence=tuple(found),
        confidence=Confidence.HIGH if top else Confidence.MEDIUM,
        fix=neighbour_fix(shown(top[0]), top[1] / other, waiting) if top else neighbour_fix(None, None, waiting),
        explanation=EXPLANATION,
        collect_next=() if top else (_which_neighbour(named, other, limits),),
    )


def _which_neighbour(named: list[tuple[str, float]], other: float, limits: Thresholds) -> str:
    """What to collect when no neighbour held enough of the wait to be named in the fix."""
    series = "schedwatch_runqueue_wait_by_neighbour_seconds_total of this workload"
    if not named:
        return f"{series} (which neighbour)"
    return (
        f"{series} over a longer window, or the node's other workloads' CPU use: no neighbour held "
        f"{100 * limits.neighbour_named_share:g} % of its wait for others in this one (the most: {shown(named[0][0])}, "
        f"{100 * named[0][1] / other:.0f} %), so several share its CPUs or the one that does joined the exported "
        "neighbours in the window"
    )
