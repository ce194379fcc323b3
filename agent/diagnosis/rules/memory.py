"""memory-pressure: the workload's memory limit bites: the kernel reclaims its pages to keep it under the limit and
it reads them back (reclaim), or kills its tasks (oom-kills).

Told by the limit's events over the window (v1's failcnt and cgroup2's max and high: a charge that hit the limit;
oom_kill), the pages reclaimed and faulted back (workingset refaults) and the kernel's stall accounting (PSI memory:
time its tasks stalled reclaiming). A limit hit now and then with nothing read back is a limit doing its job.
"""

from __future__ import annotations

import math

from agent.diagnosis.facts import WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.thresholds import Thresholds

PAGE = 4096
MIB = 1 << 20
HITS = ("max", "high")  # the limit's events: a charge hit memory.max (v1: failcnt), or went over memory.high

EXPLANATIONS = {
    Mechanism.RECLAIM: (
        "The workload's memory limit is smaller than the memory it keeps using: at the limit the kernel reclaims its "
        "pages (its page cache first) and it reads them back, from disk, over and over. Its threads stall in reclaim "
        "and I/O while its CPU use looks modest."
    ),
    Mechanism.OOM_KILLS: (
        "The workload's memory limit is smaller than the memory it needs: the kernel cannot reclaim enough and kills "
        "its tasks (the OOM killer), which then restart or fail."
    ),
}


def _mib(value: float) -> str:
    return f"{value / MIB:,.0f} MiB"


def memory_fix(mechanism: Mechanism, limit: float | None, refaulted: float | None) -> Fix:
    """Raise the limit that bites, with the numbers: double it as a first step, or shrink what it keeps."""
    reread = f" it reads {_mib(refaulted)} a second back after reclaim;" if refaulted else ""
    if limit is not None:
        target = math.ceil(2 * limit / (64 * MIB)) * 64 * MIB
        summary = (
            f"Its memory limit of {_mib(limit)} bites:{reread} raise it, to {_mib(target)} as a first step (twice), "
            "then check that the limit's hits and refaults stop."
        )
    else:
        summary = f"Its memory limit bites:{reread} raise it above what it keeps using, then check the refaults stop."
    steps = [
        "Kubernetes: resources.limits.memory (and requests); Docker: --memory. Page cache counts against the limit: "
        "a job that rereads a data set needs the data set's size in its limit to keep it cached.",
        "Or make it keep less: read the data in a stream once instead of rereading it, smaller batches, or "
        "posix_fadvise(DONTNEED) on data it will not read again.",
    ]
    if mechanism is Mechanism.OOM_KILLS:
        steps.insert(0, "Its tasks were killed for want of memory: the limit must cover its peak, not its average.")
    return Fix(summary=summary, steps=tuple(steps))


def check(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """The memory-pressure cause for one workload, or None (also when its memory events are not known)."""
    events = workload.memory_events
    if events is None or not workload.seconds:
        return None
    hits = workload.rate(sum(events.get(name, 0.0) for name in HITS)) or 0.0
    killed = events.get("oom_kill", 0.0)
    refaults = workload.rate(workload.memory_refaults)
    stall = workload.rate((workload.pressure_waiting_seconds or {}).get("memory"))
    if killed > 0:
        mechanism = Mechanism.OOM_KILLS
    elif hits >= limits.memory_limit_hits_per_second and (
        (refaults is not None and refaults >= limits.memory_refaults_per_second)
        or (stall is not None and stall >= limits.memory_stall_share)
    ):
        mechanism = Mechanism.RECLAIM
    else:
        return None
    limit = workload.memory_limit_bytes
    found: list[Evidence] = []
    if limit is not None:
        found.append(evidence("its memory limit", limit / MIB, "MiB", "the tightest over its cgroups"))
    if killed:
        found.append(evidence("tasks killed for want of memory", killed, "tasks", "0 where the limit fits"))
    found.append(
        evidence("times a charge hit the limit, per second", hits, "/s", f"bar {limits.memory_limit_hits_per_second:g}")
    )
    if refaults is not None:
        found.append(
            evidence(
                "pages reclaimed and read back, per second",
                refaults,
                "/s",
                f"bar {limits.memory_refaults_per_second:,.0f}",
            )
        )
    io = workload.rate((workload.pressure_waiting_seconds or {}).get("io"))
    if stall is not None:
        found.append(evidence("time stalled on memory (PSI some)", 100 * stall, "%", "of the window"))
    if io is not None:
        found.append(evidence("time stalled on I/O (PSI some)", 100 * io, "%", "reading back what was reclaimed"))
    refaulted = None if refaults is None else refaults * PAGE
    return workload_finding(
        workload,
        cause=Cause.MEMORY_PRESSURE,
        mechanism=mechanism,
        evidence=tuple(found),
        confidence=Confidence.HIGH if limit is not None else Confidence.MEDIUM,
        fix=memory_fix(mechanism, limit, refaulted),
        explanation=EXPLANATIONS[mechanism],
        collect_next=() if limit is not None else ("cat memory.max (cgroup2) or memory.limit_in_bytes (v1) of it",),
    )
