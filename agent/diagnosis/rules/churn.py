"""process-churn: the workload starts a process (fork, exec) for each piece of work and lets it end, many times a
second: each costs a fork, an exec, the dynamic loader's mappings and page faults, and an exit.

Told by processes that exited (their last thread did: threads that come and go inside a long-lived process, as a
thread pool's, are not processes and do not count) and the CPU it spends; the parent that spawns them is the process
whose reaped children's CPU time grows most (read closely, where the processes were read).
"""

from __future__ import annotations

from agent.diagnosis.facts import ProcessView, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.budget import PROCESS, busiest_process, family_rate, process_name
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATION = (
    "The workload starts a new process for each piece of work and lets it exit, many times a second: every one costs "
    "a fork, an exec, the loader mapping its libraries, page faults and an exit, much of it in the kernel, before the "
    "work itself begins."
)


def churn_fix(rate: float, cpu_each: float | None, parent: ProcessView | None) -> Fix:
    """Keep workers alive and hand them the work."""
    who = f" {process_name(parent)} starts them" if parent is not None else ""
    cost = f", about {1e3 * cpu_each:.1f} ms of CPU each" if cpu_each is not None else ""
    return Fix(
        summary=f"Reuse processes instead of starting one per piece of work: {rate:,.0f} exit a second{cost}.{who}",
        steps=(
            "Keep a worker alive and send it the work: a long-running server or helper process reading requests from "
            "a pipe or socket, instead of an exec (or a shell command) per request.",
            "Python: multiprocessing.Pool without maxtasksperchild (or a large one), concurrent.futures "
            "ProcessPoolExecutor kept for the program's life; call the library in-process rather than "
            "subprocess.run of a command per item.",
            "Shell: a loop that runs a command per line spawns a process per line; let one command take all lines "
            "(xargs -n 1000, a single awk).",
        ),
    )


def check(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """The process-churn cause for one workload, or None (also when processes exited are not counted)."""
    rate = workload.rate(workload.processes_exited)
    if rate is None or rate < limits.churn_exits_per_second:
        return None
    used = workload.cpu_used_cores
    if used is not None and used < limits.churn_cpu_cores:
        return None
    found: list[Evidence] = [
        evidence(
            "processes exited per second",
            rate,
            "/s",
            f"threads that exit are not counted; bar {limits.churn_exits_per_second:g}",
        )
    ]
    calls = family_rate(workload, PROCESS)
    if calls is not None:
        found.append(evidence("fork, exec and wait calls per second", calls, "/s", "a long-lived worker: about 0"))
    cpu_each = None if used is None else used / rate
    if used is not None:
        found.append(evidence("CPU used", used, "CPUs", f"bar {limits.churn_cpu_cores:g}"))
    if workload.system_share is not None:
        found.append(evidence("system share of its CPU time", 100 * workload.system_share, "%", "of its CPU"))
    parent = busiest_process(workload, lambda process: process.children_cpu_percent)
    if parent is not None and parent.children_cpu_percent is not None:
        found.append(
            evidence(
                f"CPU of the children {process_name(parent)} reaped",
                parent.children_cpu_percent,
                "% of a CPU",
                "the parent that spawns them",
            )
        )
    collect: tuple[str, ...] = ()
    if parent is None:
        collect = ("execsnoop-bpfcc, or `ps -eo pid,ppid,etimes,comm --sort=etimes | head` a few times (who spawns)",)
    return workload_finding(
        workload,
        cause=Cause.PROCESS_CHURN,
        mechanism=Mechanism.SHORT_LIVED_PROCESSES,
        evidence=tuple(found),
        confidence=Confidence.HIGH if used is not None else Confidence.MEDIUM,
        fix=churn_fix(rate, cpu_each, parent),
        explanation=EXPLANATION,
        collect_next=collect,
    )
