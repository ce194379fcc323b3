"""unexplained: much of the workload's CPU time is in the kernel, its time budget was measured (system calls by
family), and none of the causes above explains it. The finding names what the budget and, where there are on-CPU
samples, its hottest kernel and user code show, and the next artifact to collect with the exact command.

Judged only for a workload no other rule named, and only with calls by family known: without them (a saved `time`
or pidstat) the other rules could not check, so the time is unknown rather than unexplained (rules/next_steps.py
says what to collect). Kernel time spent in reads and writes the workload asked for (most of its calls file or
network I/O) is its I/O, not a mystery: left to the observations too.
"""

from __future__ import annotations

from agent.diagnosis.facts import CodeShare, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.budget import FILE, NETWORK, busiest_process, calls_share, kernel_cores
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.thresholds import Thresholds

FAMILIES_NAMED = 3
CODE_NAMED = 3

EXPLANATION = (
    "Much of the workload's CPU time is spent in the kernel, and none of the known causes (thread pools, locks, clock "
    "reads, polling, process or allocator churn, neighbours, steal, memory limits) explains it. The counts say which "
    "system calls it makes; a profile says where the kernel spends the time."
)


def _hottest(samples: tuple[CodeShare, ...], mode: str, total: float) -> list[tuple[str, float]]:
    rows = sorted((row for row in samples if row.mode == mode), key=lambda row: -row.count)[:CODE_NAMED]
    return [(f"{row.function or '?'} ({row.library})", row.count / total) for row in rows]


def unexplained_fix(pid: str, sampled: bool) -> Fix:
    """The next artifact and the exact command."""
    record = f"perf record -g -p {pid} -- sleep 10; perf report --stdio --no-children --sort dso,sym"
    calls = f"perf trace -s -p {pid} -- sleep 10"
    steps: tuple[str, ...]
    if sampled:
        summary = f"Find who calls the hottest kernel code: {record} (the call graph above it)."
        steps = (record, f"{calls} (which system calls take the time, per thread)")
    else:
        summary = f"Collect where the kernel time goes: {record}."
        steps = (
            record,
            f"{calls} (which system calls take the time, per thread)",
            "schedwatch diagnose with on-CPU samples, where the agent samples (the hottest kernel and user code)",
        )
    return Fix(summary=summary, steps=steps)


def check(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """The unexplained finding for one workload no other rule named, or None."""
    calls = workload.syscall_calls_by_family
    kernel, share = kernel_cores(workload), workload.system_share
    if calls is None or kernel is None or share is None:
        return None
    if kernel < limits.unexplained_system_cores or share < limits.unexplained_system_share:
        return None
    io = calls_share(workload, FILE, NETWORK)
    if io is not None and io >= limits.io_call_share:
        return None
    found: list[Evidence] = [
        evidence("CPUs' worth of time in the kernel", kernel, "CPUs", f"bar {limits.unexplained_system_cores:g}"),
        evidence("system share of its CPU time", 100 * share, "%", f"bar {100 * limits.unexplained_system_share:g} %"),
    ]
    total_calls = sum(calls.values())
    for family, count in sorted(calls.items(), key=lambda item: -item[1])[:FAMILIES_NAMED]:
        if count > 0 and workload.seconds:
            found.append(
                evidence(
                    f"{family} system calls per second",
                    count / workload.seconds,
                    "/s",
                    f"{100 * count / total_calls:.0f} % of its calls; no cause known for it",
                )
            )
    samples = workload.cpu_samples or ()
    total = workload.cpu_samples_total or sum(row.count for row in samples)
    sampled = bool(samples) and total > 0
    if sampled:
        for mode in ("kernel", "user"):
            for name, part in _hottest(samples, mode, total):
                found.append(evidence(f"on-CPU samples in {name}", 100 * part, "%", f"hottest {mode} code"))
    busiest = busiest_process(workload, lambda process: process.system_percent)
    pid = str(busiest.pid) if busiest is not None else "PID"
    return workload_finding(
        workload,
        cause=Cause.UNEXPLAINED,
        mechanism=Mechanism.SYSTEM_TIME,
        evidence=tuple(found),
        confidence=Confidence.MEDIUM,
        fix=unexplained_fix(pid, sampled),
        explanation=EXPLANATION,
        collect_next=unexplained_fix(pid, sampled).steps,
    )
