"""clock-reads-as-syscalls: the workload's clock reads enter the kernel, thousands of times a second.

A clock read through the C library stays in user space (the vDSO) when the node's clock source allows it (tsc,
kvm-clock, arch_sys_counter); on one without (hpet, acpi_pm, an unstable TSC's fallback) every read is a system
call. The clock family counts only reads that reached the kernel, so its rate says how many; the node's clock source
says why: it has no vDSO (change it), or it has one and the program goes around it (a raw syscall, a CPU-time clock
the vDSO does not serve, no vDSO in its process).
"""

from __future__ import annotations

from agent.diagnosis.facts import NodeView, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.budget import CLOCK, busiest_thread, family_rate, thread_name
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.thresholds import Thresholds

# Clock sources whose reads cannot use the vDSO: every clock_gettime/gettimeofday is a system call.
NO_VDSO = frozenset({"hpet", "acpi_pm", "jiffies", "refined-jiffies", "pit"})
# Clock sources with a vDSO fast path, best first.
WITH_VDSO = ("tsc", "kvm-clock", "arch_sys_counter", "hyperv_clocksource_tsc_page", "xen")
CLOCKSOURCE_DIR = "/sys/devices/system/clocksource/clocksource0"

EXPLANATIONS = {
    Mechanism.NO_VDSO_CLOCK_SOURCE: (
        "The node's clock source has no vDSO fast path, so every clock read of the workload (clock_gettime, "
        "gettimeofday, time) is a system call, and a slow one. The time goes to reading the clock in the kernel."
    ),
    Mechanism.VDSO_BYPASSED: (
        "The node's clock source lets clock reads stay in user space (the vDSO), yet the workload's reads enter the "
        "kernel: it calls the clock through syscall(2), asks for a clock the vDSO does not serve (the CPU-time "
        "clocks), or runs without a vDSO. Each read costs a system call."
    ),
    Mechanism.CLOCK_SYSCALLS: (
        "The workload's clock reads enter the kernel thousands of times a second: either the node's clock source "
        "has no vDSO fast path, or the program goes around it. Each read costs a system call."
    ),
}


def _mechanism(node: NodeView) -> Mechanism:
    current, available = node.clocksource, node.available_clocksources
    if current in NO_VDSO:
        return Mechanism.NO_VDSO_CLOCK_SOURCE
    if current is None and available and all(name in NO_VDSO for name in available):
        return Mechanism.NO_VDSO_CLOCK_SOURCE  # whichever it uses has none
    if current is not None:
        return Mechanism.VDSO_BYPASSED
    return Mechanism.CLOCK_SYSCALLS


def clock_fix(mechanism: Mechanism, node: NodeView, rate: float) -> Fix:
    """Change the clock source, or cut the reads that go around the vDSO; and read the clock less."""
    fast = [name for name in WITH_VDSO if name in (node.available_clocksources or ())]
    cut = (
        f"Read the clock less: {rate:,.0f} reads a second now. Take one timestamp per batch or request instead of "
        "per item, or use CLOCK_MONOTONIC_COARSE / CLOCK_REALTIME_COARSE where a few milliseconds of resolution do."
    )
    if mechanism is Mechanism.NO_VDSO_CLOCK_SOURCE:
        if fast:
            switch = (
                f"Switch the node's clock source to {fast[0]} (available here): echo {fast[0]} > "
                f"{CLOCKSOURCE_DIR}/current_clocksource now, and clocksource={fast[0]} on the kernel command line to "
                "keep it (tsc=reliable only where the TSC is known to be stable)."
            )
        else:
            switch = (
                "No clock source with a vDSO is available on this node: choose a VM type or hypervisor setting that "
                "exposes a stable TSC or kvm-clock (e.g. an invariant TSC passed to the guest), then clocksource=tsc."
            )
        return Fix(
            summary=f"Give the node a clock source with a vDSO ({fast[0] if fast else 'tsc or kvm-clock'}): every "
            f"one of the {rate:,.0f} clock reads a second is a system call now.",
            steps=(switch, cut),
        )
    if mechanism is Mechanism.VDSO_BYPASSED:
        return Fix(
            summary=f"Read the clock through the C library's clock_gettime with CLOCK_MONOTONIC or CLOCK_REALTIME "
            f"(the vDSO of the node's {node.clocksource}), and less often: {rate:,.0f} reads a second enter the "
            "kernel now.",
            steps=(
                "Find which clock it asks for and how: strace -f -e trace=clock_gettime,gettimeofday,time -p PID "
                "(a raw syscall(SYS_clock_gettime), or CLOCK_PROCESS_CPUTIME_ID / CLOCK_THREAD_CPUTIME_ID, which the "
                "vDSO does not serve); a statically linked binary or a sandbox may have no vDSO at all.",
                "Use clock_gettime() of the C library with CLOCK_MONOTONIC(_COARSE) or CLOCK_REALTIME(_COARSE); "
                "measure CPU time per batch, not per item.",
                cut,
            ),
        )
    return Fix(
        summary=f"Find why {rate:,.0f} clock reads a second enter the kernel: the node's clock source, or the "
        "program going around the vDSO.",
        steps=(
            f"cat {CLOCKSOURCE_DIR}/current_clocksource {CLOCKSOURCE_DIR}/available_clocksource on the node: hpet or "
            "acpi_pm have no vDSO (switch to tsc or kvm-clock where available).",
            "strace -f -e trace=clock_gettime,gettimeofday -p PID: which clocks it asks for.",
            cut,
        ),
    )


def check(workload: WorkloadView, node: NodeView, limits: Thresholds) -> Finding | None:
    """The clock-read cause for one workload, or None (also when its calls by family are unknown)."""
    rate = family_rate(workload, CLOCK)
    if rate is None or rate < limits.clock_calls_per_second:
        return None
    share = workload.system_share
    if share is not None and share < limits.clock_system_share:
        return None
    mechanism = _mechanism(node)
    found: list[Evidence] = [
        evidence(
            "clock reads that entered the kernel, per second",
            rate,
            "/s",
            f"through the vDSO: 0; bar {limits.clock_calls_per_second:,.0f}",
        )
    ]
    if share is not None:
        found.append(
            evidence("system share of its CPU time", 100 * share, "%", f"bar {100 * limits.clock_system_share:g} %")
        )
    inside = (workload.syscall_seconds_by_family or {}).get(CLOCK)
    if inside is not None and workload.seconds:
        found.append(evidence("time inside clock calls per second", inside / workload.seconds, "s/s", "0 with a vDSO"))
    if node.clocksource is not None or node.available_clocksources is not None:
        available = node.available_clocksources or ()
        found.append(
            evidence(
                "node clock sources with a vDSO",
                sum(name in WITH_VDSO for name in available),
                "available",
                f"in use: {node.clocksource or 'unknown'}; available: {', '.join(available) or 'unknown'}",
            )
        )
    thread = busiest_thread(workload, lambda thread: thread.system_percent)
    collect: tuple[str, ...] = ()
    if mechanism is Mechanism.CLOCK_SYSCALLS:
        collect = (f"cat {CLOCKSOURCE_DIR}/current_clocksource on the node (a clock source without a vDSO?)",)
    explanation = EXPLANATIONS[mechanism]
    if thread is not None:
        explanation += f" Most of its kernel time is in {thread_name(thread)}."
    return workload_finding(
        workload,
        cause=Cause.CLOCK_READS_AS_SYSCALLS,
        mechanism=mechanism,
        evidence=tuple(found),
        confidence=Confidence.MEDIUM if share is None or mechanism is Mechanism.CLOCK_SYSCALLS else Confidence.HIGH,
        fix=clock_fix(mechanism, node, rate),
        explanation=explanation,
        collect_next=collect,
    )
