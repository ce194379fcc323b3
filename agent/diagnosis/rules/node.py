"""Observations: time the facts show that is not a thread-contention cause schedwatch measures, and where to look.

A signature named here is said to be likely, never a finding: schedwatch does not measure clock sources,
compaction or page faults.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.diagnosis.facts import Facts, Workload, WorkloadView
from agent.diagnosis.findings import Evidence, Finding, Observation
from agent.diagnosis.rules.common import COLLECT_LIVE, KERNEL_TIME_MECHANISMS, evidence
from agent.diagnosis.rules.thresholds import Thresholds

SYSTEM_TIME_MECHANISMS = KERNEL_TIME_MECHANISMS  # findings that explain high system time

# Well-known system-call signatures of system time schedwatch does not measure: (calls, what it likely is, look next).
SIGNATURES: tuple[tuple[frozenset[str], str, str], ...] = (
    (
        frozenset({"clock_gettime", "gettimeofday", "time"}),
        "clock reads going through the kernel: likely a clock source without a vDSO fast path "
        "(e.g. xen or hpet instead of tsc)",
        "cat /sys/devices/system/clocksource/clocksource0/current_clocksource",
    ),
    (
        frozenset({"mmap", "munmap", "brk", "madvise", "mprotect"}),
        "memory mapped and unmapped over and over: likely allocator churn and the page faults that follow",
        "perf stat -e page-faults,minor-faults -p PID; MALLOC_ARENA_MAX / a malloc that keeps memory",
    ),
    (
        frozenset(
            {
                "read",
                "write",
                "pread64",
                "pwrite64",
                "recvfrom",
                "sendto",
                "recvmsg",
                "sendmsg",
                "poll",
                "epoll_wait",
                "select",
            }
        ),
        "I/O system calls: the time is spent reading and writing, not contending for CPUs",
        "the I/O path: iostat -x 1, ss -tin, the service the workload talks to",
    ),
)
# CPU states that are nobody's contention: (state, its bar in Thresholds, what it means, where to look).
CPU_STATES: tuple[tuple[str, str, str, str], ...] = (
    (
        "steal",
        "steal_percent",
        "The hypervisor gave {share:.0f} % of this VM's CPU time to others (steal): not the workload's doing.",
        "the VM's size or type; a dedicated-core instance",
    ),
    (
        "softirq",
        "softirq_percent",
        "{share:.0f} % of CPU time goes to soft interrupts (network, timers, block I/O).",
        "cat /proc/softirqs twice; mpstat -I SCPU 1",
    ),
    (
        "iowait",
        "iowait_percent",
        "CPUs sit idle waiting for I/O {share:.0f} % of the time: storage, not CPU contention.",
        "iostat -x 1; pidstat -d 1",
    ),
)

SIGNATURE_SHARE = 0.5  # of the time in system calls that do not block, for a signature to be named
# Calls whose time is mostly sleeping, not system time: left out of the share.
BLOCKING = frozenset(
    {
        "futex",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "poll",
        "ppoll",
        "select",
        "pselect6",
        "nanosleep",
        "clock_nanosleep",
        "wait4",
        "waitid",
        "pause",
        "rt_sigtimedwait",
        "rt_sigsuspend",
        "sched_yield",
    }
)


def signature_of(workload: WorkloadView) -> tuple[str, str, float] | None:
    """The well-known signature of *workload*'s system-call time: (what it likely is, where to look, its share)."""
    times = workload.syscall_seconds
    if not times:
        return None
    total = sum(seconds for name, seconds in times.items() if name not in BLOCKING)
    if total <= 0:
        return None
    for calls, what, look in SIGNATURES:
        share = sum(seconds for name, seconds in times.items() if name in calls) / total
        if share >= SIGNATURE_SHARE:
            return what, look, share
    return None


def _multithreaded_workers(workloads: Iterable[WorkloadView]) -> Observation | None:
    for workload in workloads:
        busy = [p for p in workload.processes or () if (p.cpu_percent or 0) > 100]
        commands = {p.command or p.comm for p in busy}
        if len(busy) >= 2 and len(commands) == 1:
            top = max(p.cpu_percent or 0 for p in busy)
            return Observation(
                topic="workers-use-several-cpus",
                summary=(
                    f"{len(busy)} processes of {commands.pop()} each use more than one CPU (up to {top:.0f} %): each "
                    "runs several threads. If those are thread pools sized to every CPU, workers x threads outnumber "
                    "the CPUs (likely, not measured by these artifacts)."
                ),
                evidence=(
                    evidence("processes using more than one CPU", len(busy), "processes", "pool workers: 1 CPU each"),
                ),
                look_next=(
                    COLLECT_LIVE,
                    "perf trace -s -p PID of one worker for ~10 s (sched_yield and futex per thread)",
                ),
                workload=workload.ref,
            )
    return None


def observations(facts: Facts, findings: tuple[Finding, ...], limits: Thresholds) -> tuple[Observation, ...]:
    """What the node's CPU time and the workloads' system calls show beyond the findings."""
    found: list[Observation] = []
    cpu = facts.node.cpu
    explained = any(finding.mechanism in SYSTEM_TIME_MECHANISMS for finding in findings)
    if cpu is not None and cpu.system is not None and cpu.system >= limits.system_percent and not explained:
        shown: list[Evidence] = [
            evidence("node CPU time in the kernel", cpu.system, "%", f"bar {limits.system_percent:g} %")
        ]
        look = [
            COLLECT_LIVE,
            "perf top -g (which kernel functions)",
            "grep -E 'compact|thp' /proc/vmstat; cat /proc/softirqs",
        ]
        spends = "Since boot (one reading), the node has spent" if cpu.since_boot else "The node spends"
        summary = (
            f"{spends} {cpu.system:.0f} % of its CPU time in the kernel, and no thread-contention cause "
            "measured here explains it."
        )
        for workload in facts.workloads:
            signature = signature_of(workload)
            if signature is not None:
                what, where, share = signature
                name = workload.ref.name if workload.ref != Workload() else "the traced processes"
                summary += f" In {name}: {what} ({100 * share:.0f} % of the time in calls that do not block)."
                look.insert(0, where)
                break
        found.append(Observation("system-time-unexplained", summary, tuple(shown), tuple(look)))
        workers = _multithreaded_workers(facts.workloads)
        if workers is not None:
            found.append(workers)
    for state, bar_name, template, where_to_look in CPU_STATES:
        value = None if cpu is None else getattr(cpu, state)
        bar = getattr(limits, bar_name)
        if value is not None and value >= bar:
            shown_state = (evidence(state, value, "%", f"bar {bar:g} %"),)
            said = ("Since boot (one reading): " if cpu is not None and cpu.since_boot else "") + template.format(
                share=value
            )
            found.append(Observation(state, said, shown_state, (where_to_look,)))
    return tuple(found)
