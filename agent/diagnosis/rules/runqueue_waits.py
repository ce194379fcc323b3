"""run-queue-saturation by other load: the workload waits long for a CPU each time it wakes, while it uses far less
than a CPU itself, so its own threads cannot be what fills the run queue: other tasks hold the CPUs.

Read from a histogram of each of its run-queue waits (runqlat -p, a bpftrace runqlat filtered to it) beside its CPU
use (pidstat, top, time): the waits judged against the scheduler's time slice (a wait longer than a few slices is
a queue of other tasks ahead of it), not as an amount per second, so a light, latency-sensitive process is seen as
well as a busy one. Who held the CPUs is named where a paste tells it (perf sched latency, timehist).
"""

from __future__ import annotations

from agent.diagnosis.facts import Facts, NodeView, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism, Observation, Unchecked
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.signals import cpus_allowed
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATION = (
    "Each time the workload's threads wake they wait long for a CPU, longer than the scheduler's time slice, while "
    "they use far less than a CPU: other tasks on the same CPUs hold them. It is the machine's load, not the "
    "workload's own threads, that makes it slow."
)
HOLDERS_NAMED = 3
SEVERAL_WAITS = 20  # switches of a task, for its average wait to be more than a moment (a command's start-up)
COLLECT_CPU = "pidstat -u -p PID 5 1 (its CPU use beside the waits)"
COLLECT_HOLDERS = "perf sched record -- sleep 5; perf sched latency --sort max (which tasks hold the CPUs)"


def other_load_fix(holders: list[str]) -> Fix:
    """Give the workload CPUs the other load does not use, or lower the other load's share."""
    who = ", ".join(holders) if holders else "the other tasks on its CPUs"
    return Fix(
        summary=f"Keep {who} off this workload's CPUs, or give the workload a larger share of them.",
        steps=(
            "Give it CPUs of its own: a cpuset (taskset -c, Docker --cpuset-cpus, Kubernetes Guaranteed QoS with whole "
            "CPUs and the static CPU manager policy) that the other load does not share.",
            f"Or lower the other load's weight (nice -n 10, cpu.weight of its cgroup) or limit it (a CPU quota): "
            f"{who}.",
            "Or raise this workload's weight (a lower nice value, a higher cpu.weight): it waits less each time it "
            "wakes.",
        ),
    )


def _holders(workload: WorkloadView, node: NodeView) -> list[str]:
    own = {process.pid for process in workload.processes or ()}
    names = {process.comm for process in workload.processes or () if process.comm}
    found: list[str] = []
    for name, _seconds in node.cpu_holders or ():
        base = name.split(" (", 1)[0]
        pid = name.rsplit("(", 1)[-1].rstrip(")") if "(" in name else ""
        if base in names or (pid.isdigit() and int(pid) in own):
            continue
        found.append(name)
    return found[:HOLDERS_NAMED]


def check(workload: WorkloadView, node: NodeView, limits: Thresholds) -> Finding | Unchecked | None:
    """Run-queue saturation by other load for one workload, or None."""
    waits = workload.runqueue_waits
    if waits is None or waits.scope == "machine" or waits.count < limits.runqueue_min_waits:
        return None
    long_share = waits.share_at_least(limits.runqueue_long_wait)
    if long_share is None or long_share < limits.runqueue_long_share:
        return None
    if node.cpu is not None and (node.cpu.steal or 0.0) >= limits.steal_percent:
        return None  # the hypervisor's: hypervisor-steal says so
    used = workload.cpu_used_cores
    if used is None:
        return Unchecked(
            rule=Cause.RUN_QUEUE_SATURATION,
            workload=workload.ref,
            missing=("its CPU use (is it its own load, or others', that fills the run queue?)",),
            collect_next=(COLLECT_CPU,),
        )
    cpus = cpus_allowed(workload, node) or 1.0
    if used > limits.light_cpu_cores or used > limits.light_cpu_cores * cpus:
        return None  # a busy workload: its own threads may fill the queue (run-queue-saturation's other rule)
    shown: list[Evidence] = [
        evidence(
            f"run-queue waits of {limits.runqueue_long_wait * 1000:g} ms or longer",
            100 * long_share,
            "%",
            f"of {waits.count:g} waits; bar {100 * limits.runqueue_long_share:g} % (a time slice is 0.75-3 ms)",
        ),
        evidence("CPU it used", used, "CPUs", f"far below what it may use: {cpus:g}"),
    ]
    if waits.window_seconds:
        waited = waits.seconds / waits.window_seconds
        shown.append(evidence("time waiting for a CPU, per second", waited, "s/s", f"it ran {used:.2f} s/s"))
    holders = _holders(workload, node)
    if holders:
        held = dict(node.cpu_holders or ()).get(holders[0], 0.0)
        shown.append(evidence(f"CPU held by {holders[0]} (the busiest other task)", held, "s", "in the trace"))
    return workload_finding(
        workload,
        cause=Cause.RUN_QUEUE_SATURATION,
        mechanism=Mechanism.OTHER_LOAD,
        evidence=tuple(shown),
        confidence=Confidence.MEDIUM,
        fix=other_load_fix(holders),
        explanation=EXPLANATION,
        collect_next=() if holders else (COLLECT_HOLDERS,),
    )


def observations(facts: Facts, limits: Thresholds) -> tuple[Observation, ...]:
    """A scheduler trace's tasks that waited longer than a few time slices for a CPU (perf sched latency): on
    average (the run queue is full), or only at times; which task is the workload the trace does not say."""
    delays = [
        task
        for task in facts.node.task_delays or ()
        if (task.max_delay_seconds or 0.0) >= limits.runqueue_long_wait and (task.switches or 0) >= SEVERAL_WAITS
    ]
    if not delays:
        return ()
    worst = max(delays, key=lambda task: task.average_delay_seconds or 0.0)
    longest = max(delays, key=lambda task: task.max_delay_seconds or 0.0)
    name = worst.name if worst.pid is None else f"{worst.name} ({worst.pid})"
    average = worst.average_delay_seconds or 0.0
    if average >= limits.runqueue_long_wait:
        summary = (
            f"{name} waited {1000 * average:.1f} ms on average for a CPU each time it woke: more than a few time "
            "slices, a full run queue on its CPUs."
        )
    else:
        summary = (
            f"Some tasks waited up to {1000 * (longest.max_delay_seconds or 0.0):.1f} ms for a CPU ({longest.name}), "
            f"but {1000 * average:.2f} ms or less on average: long waits at times, not a full run queue."
        )
    return (
        Observation(
            "runqueue-delays",
            summary + " Which task is the workload, and how often it waits so, the trace alone does not tell.",
            (
                evidence(f"average wait for a CPU of {name}", 1000 * average, "ms", "a time slice: 0.75-3 ms"),
                evidence(
                    f"longest wait ({longest.name})",
                    1000 * (longest.max_delay_seconds or 0.0),
                    "ms",
                    f"bar {1000 * limits.runqueue_long_wait:g} ms",
                ),
            ),
            ("runqlat-bpfcc -p PID 10 1 (each wait of the workload), with pidstat -u -p PID 10 1 (its CPU use)",),
        ),
    )
