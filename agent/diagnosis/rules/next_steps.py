"""Observations with a next step: what a workload's CPU time shows when the facts cannot prove a cause, and the
exact command that would.

These are never findings. A workload's CPU time split by mode (from ``time``, pidstat or the live agent) says
*where* the time went, not *why*: most of it in the kernel may be system calls, page faults, a clock source without
a vDSO or interrupts, none of them thread contention. So the observation names what is shown and what to collect.
"""

from __future__ import annotations

from agent.diagnosis.facts import Facts, WorkloadView
from agent.diagnosis.findings import Cause, Finding, Observation
from agent.diagnosis.rules import code, node
from agent.diagnosis.rules.common import KERNEL_TIME_MECHANISMS, evidence
from agent.diagnosis.rules.thresholds import DEFAULT

EXPLAINS_KERNEL_TIME = KERNEL_TIME_MECHANISMS  # findings that already explain time in the kernel
KERNEL_SHARE = 0.4  # of the workload's CPU time; a program that computes spends well under a tenth in the kernel
MAX_CPUS = 1024  # CPU time over wall time above this is no machine's: the accounting itself is wrong
MIN_CPU_SECONDS = 0.1  # below this, a split by mode is a few clock ticks: nothing to go on
SEVERAL_CPUS = 1.5  # CPUs used above this: several threads ran at once, and their CPU times add up

WHICH_CALLS = (
    "run `schedwatch diagnose --pid PID` (it counts system calls by family, which the agent leaves off by default), "
    "`perf trace -s -p PID` or `strace -f -c -p PID` for 10 s (which system calls take the time)"
)
WHICH_KERNEL_CODE = "`perf top -g -p PID` or `perf record -g -p PID -- sleep 10` (which kernel functions)"


def _implausible(workload: WorkloadView) -> Observation | None:
    used = workload.cpu_used_cores
    if used is None or used <= MAX_CPUS or workload.seconds is None:
        return None
    cpu = (workload.user_seconds or 0) + (workload.system_seconds or 0)
    return Observation(
        topic="cpu-time-implausible",
        summary=(
            f"{cpu:g} s of CPU time in {workload.seconds:g} s of wall time would be {used:.0f} CPUs at once: the "
            "platform's CPU-time accounting is wrong (a tick or clock problem of the OS or emulation layer), "
            "not a load. Its user/system split cannot be trusted."
        ),
        evidence=(evidence("CPU time / wall time", used, "CPUs", f"no machine: above {MAX_CPUS}"),),
        look_next=(
            "the same command under `perf stat -e task-clock` (CPU time the kernel's scheduler measured)",
            "cat /sys/devices/system/clocksource/clocksource0/current_clocksource",
        ),
        workload=workload.ref,
    )


def _kernel_time(workload: WorkloadView) -> Observation | None:
    share = workload.system_share
    cpu = (workload.user_seconds or 0) + (workload.system_seconds or 0)
    if share is None or share < KERNEL_SHARE or workload.syscall_seconds or cpu < MIN_CPU_SECONDS:
        return None  # with system-call times known, node.py's signatures say which calls
    shown = [evidence("CPU time in the kernel", 100 * share, "%", f"bar {100 * KERNEL_SHARE:g} %")]
    summary = f"{100 * share:.0f} % of the workload's CPU time is in the kernel"
    if workload.system_seconds is not None and workload.user_seconds is not None:
        summary += f" ({workload.system_seconds:g} s system, {workload.user_seconds:g} s user)"
    summary += "; these sources cannot say which calls or kernel code."
    used = workload.cpu_used_cores
    if used is not None and used >= SEVERAL_CPUS:
        shown.append(evidence("CPUs used (CPU time / wall time)", used, "CPUs", "one thread: at most 1"))
        summary += (
            f" It ran on {used:.1f} CPUs at once: several threads, whose CPU times add up (system time can exceed "
            "the wall time)."
        )
    return Observation(
        topic="kernel-time-collect-next",
        summary=summary,
        evidence=tuple(shown),
        look_next=(WHICH_CALLS, WHICH_KERNEL_CODE),
        workload=workload.ref,
    )


# Clock sources whose reads cannot use the vDSO: every clock_gettime/gettimeofday becomes a system call.
NO_VDSO = frozenset({"hpet", "acpi_pm", "jiffies", "refined-jiffies", "pit"})
CLOCKSOURCE_FILE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"


YIELD_CALL_SHARE = 0.5  # of its time in system calls, in sched_yield: its threads spin on the call


def _yield_calls(workload: WorkloadView, findings: tuple[Finding, ...]) -> Observation | None:
    """Most of a workload's system-call time in sched_yield, with too few calls or threads for the pool rule to judge
    (a saved strace -c of a server): threads spinning on the call; whose, collect next."""
    times, yields = workload.syscall_seconds, workload.sched_yield_calls
    if not times or not yields or any(finding.workload == workload.ref for finding in findings):
        return None
    total = sum(times.values())
    share = times.get("sched_yield", 0.0) / total if total > 0 else 0.0
    if share < YIELD_CALL_SHARE or yields >= DEFAULT.yields_per_thread:
        return None  # the pool rule judges (or says what to collect for) as many yields as that
    return Observation(
        "yield-calls-collect-next",
        f"{100 * share:.0f} % of its time in system calls is sched_yield ({yields:,.0f} calls): threads spin on it "
        "(a thread pool's idle threads, a spin lock, a runtime's scheduler), which these sources cannot tell apart.",
        (evidence("system-call time in sched_yield", 100 * share, "%", f"bar {100 * YIELD_CALL_SHARE:g} %"),),
        (
            "perf trace -s -p PID -- sleep 10 (which threads yield, and how often)",
            "perf record -g -p PID -- sleep 10; perf report --stdio --no-children -S sched_yield -G (who calls it)",
        ),
        workload=workload.ref,
    )


USER_SPIN_CPUS = 1.5  # CPUs busy at once, almost all in user space: computing, or spinning
USER_SPIN_SHARE = 0.1  # ... with at most this share in the kernel


def _busy_in_user_space(workload: WorkloadView, findings: tuple[Finding, ...]) -> Observation | None:
    """Several CPUs busy almost only in user space, with no finding (a saved perf stat or time): work, or a pool's
    threads spinning in user space (libomp's, newer OpenBLAS's), which CPU time alone cannot tell apart."""
    used, share = workload.cpu_used_cores, workload.system_share
    if used is None or share is None or used < USER_SPIN_CPUS or share > USER_SPIN_SHARE or used > MAX_CPUS:
        return None
    if any(finding.workload == workload.ref for finding in findings) or workload.cpu_samples:
        return None
    if workload.runqueue_wait_seconds is not None or workload.stacks is not None:
        return None  # measured live (or with stacks): the rules and the code observations say more than CPU time
    return Observation(
        "user-cpu-collect-next",
        f"It kept {used:.1f} CPUs busy, {100 * (1 - share):.0f} % of it in user space: computing, or threads "
        "spinning while they wait (an OpenMP or BLAS pool's idle threads look like work in CPU time).",
        (evidence("CPUs used (CPU time / wall time)", used, "CPUs", f"{USER_SPIN_CPUS:g} or more, in user space"),),
        (
            "perf record -g -p PID -- sleep 10; perf report --stdio --no-children --sort dso,sym (work, or a pool's "
            "spin loop: gomp_barrier_wait_end, __kmp_wait, blas_thread_server)",
            "the run once with OMP_WAIT_POLICY=passive (idle OpenMP threads sleep): faster or as fast",
        ),
        workload=workload.ref,
    )


def _clocksource(facts: Facts) -> Observation | None:
    node = facts.node
    current = node.clocksource
    available = node.available_clocksources
    if current is None and available and all(name in NO_VDSO for name in available):
        current = available[0]  # none of those it could use has a vDSO: whichever it uses is so
    unstable = [event for event in node.clocksource_events if "unstable" in event]
    if current in NO_VDSO:
        shown = (
            evidence("kernel lines marking the TSC unstable", len(unstable), "lines", f"{current}: no vDSO fast path"),
        )
        summary = (
            (
                f"The node's clock source is {current}"
                if node.clocksource
                else f"The node's only clock sources are {' and '.join(available or ())}"
            )
            + ": no vDSO fast path, so every clock read "
            "(clock_gettime, gettimeofday) is a system call, and a slow one. This is system time spent on the "
            "clock, not thread contention."
        )
        if unstable:
            summary += " The kernel switched to it after its watchdog marked the TSC unstable."
        look = (
            f"cat {CLOCKSOURCE_FILE.replace('current_', 'available_')} (is tsc there?)",
            "perf trace -s -p PID for 10 s (how many clock_gettime calls a workload makes)",
            "the VM or BIOS: an invariant TSC (e.g. a VM type or host setting that passes it), or tsc=reliable "
            "only where the TSC is known good",
        )
        return Observation("clocksource-without-vdso", summary, shown, look)
    if unstable and current is None:
        return Observation(
            "clocksource-tsc-unstable",
            "The kernel's watchdog marked the TSC unstable: it then moves to a slower clock source, and clock "
            "reads may become system calls. These lines do not say which it chose. Not thread contention.",
            (evidence("kernel lines marking the TSC unstable", len(unstable), "lines", "none on a stable TSC"),),
            (f"cat {CLOCKSOURCE_FILE}", "perf trace -s -p PID for 10 s (clock_gettime calls per second)"),
        )
    return None


def _clock_calls(facts: Facts, workload: WorkloadView) -> Observation | None:
    """Clock reads taking most of the time in calls that do not block, where no node CPU line can say more
    (with one, node.py names the signature in its system-time observation)."""
    if facts.node.cpu is not None or (signature := node.signature_of(workload)) is None:
        return None
    what, where, share = signature
    if "clock" not in what:
        return None
    return Observation(
        "clock-reads-in-kernel",
        f"{100 * share:.0f} % of the time in system calls that do not block is {what}. Not thread contention.",
        (evidence("time in clock-read calls", 100 * share, "%", f"of non-blocking call time, bar {50:g} %"),),
        (where, "perf trace -s -p PID -- sleep 10 (clock calls per second)"),
        workload=workload.ref,
    )


# Code observations a finding read from the same stacks already says (each thing said once).
SAID_BY = {
    Cause.THREAD_POOL_OVERSUBSCRIPTION: frozenset({"yield-site", "hot-code-sched-yield", "hot-code-user-spin"}),
    Cause.ALLOCATOR_CONTENTION: frozenset({"hot-code-user-spin", "futex-site"}),
    Cause.FUTEX_CONTENTION: frozenset({"futex-site"}),
}


def observations(facts: Facts, findings: tuple[Finding, ...]) -> tuple[Observation, ...]:
    """The node's clock source; for each workload whose kernel time no finding explains, what its CPU time shows;
    for each, what its hottest code and call sites show (rules/code.py); each with what to collect."""
    found: list[Observation] = []
    if (clock := _clocksource(facts)) is not None:
        found.append(clock)
    for workload in facts.workloads:
        explained = any(
            finding.workload == workload.ref and finding.mechanism in EXPLAINS_KERNEL_TIME for finding in findings
        )
        implausible = _implausible(workload)
        if implausible is not None:
            found.append(implausible)
            continue  # the split of a wrong total says nothing
        if not explained and (kernel := _kernel_time(workload)) is not None:
            found.append(kernel)
        if not explained and (clock := _clock_calls(facts, workload)) is not None:
            found.append(clock)
        for extra in (_yield_calls(workload, findings), _busy_in_user_space(workload, findings)):
            if extra is not None:
                found.append(extra)
        said = {topic for finding in findings if finding.workload == workload.ref
                for topic in SAID_BY.get(finding.cause, ())}  # fmt: skip
        found.extend(observation for observation in code.observations(workload) if observation.topic not in said)
    return tuple(found)
