"""Which source the collectors use: BPF, counting perf events, or /proc alone (--mode), and what each lacks.

Collector names stay the same in every mode (syscalls, sched, syscall_families, cgroup_cpu, cgroup_memory), so
--no-collector.NAME and metrics.SOURCE_UP mean the same everywhere; only where their counts come from changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent import metrics
from agent.bpf.probes.gaps import kernel_gaps
from agent.collectors import Availability, CollectorFactory
from agent.collectors.common.availability import bpf_support
from agent.machine.facts import MachineFacts

BPF, PERF, PROCFS = "bpf", "perf", "procfs"


_CODE = metrics.shown(metrics.CPU_SAMPLES, metrics.SCHED_YIELD_CALLS_BY_SITE, metrics.FUTEX_WAITS_BY_SITE)
_FROM_PROC = metrics.shown(metrics.RUNQUEUE_WAIT_SECONDS, metrics.ONCPU_SECONDS)
_LATENCY = metrics.shown(metrics.RUNQUEUE_LATENCY, metrics.OFFCPU_SECONDS)
_FUTEX_WAITS = metrics.shown(metrics.FUTEX_WAIT_SECONDS, metrics.FUTEX_WAIT_DURATION)
_COUNTS = metrics.shown(metrics.SCHED_YIELD_CALLS, metrics.FUTEX_CALLS, metrics.FUTEX_WAIT_SECONDS)
_CALLS, _SECONDS = metrics.shown(metrics.SYSCALLS), metrics.shown(metrics.SYSCALL_SECONDS)
CODE_MISSING = f"on-CPU samples and call sites by library and function ({_CODE})"
# What a mode cannot tell, beside BPF mode's series (BPF mode's own gaps depend on the kernel: kernel_gaps).
MISSING = {
    BPF: (),
    PERF: (
        f"futex wait time and its histogram ({_FUTEX_WAITS})",
        f"the run-queue latency histogram and off-CPU time ({_LATENCY}); run-queue wait and CPU time come from "
        f"/proc ({_FROM_PROC})",
        "per-process series (--process-top-k)",
        "the system calls of the families file, network and other, and the time inside every family "
        f"({_CALLS} for those, {_SECONDS}); the families yield, futex, clock, sleep, poll, memory and process are "
        "counted with --perf-syscall-families",
        CODE_MISSING,
    ),
    PROCFS: (
        f"sched_yield and futex counts ({_COUNTS})",
        f"the run-queue latency histogram and off-CPU time; run-queue wait and CPU time come from /proc ({_FROM_PROC})",
        "per-process series (--process-top-k)",
        f"system calls by family and the time inside them ({_CALLS}, {_SECONDS})",
        CODE_MISSING,
    ),
}


@dataclass(frozen=True)
class ModeChoice:
    """The mode in use, why, what it cannot tell, and how to get more."""

    mode: str
    reason: str
    missing: tuple[str, ...] = ()
    fix: str = ""


def factories(mode: str) -> list[CollectorFactory]:
    """The collectors of *mode*, in the order they start."""
    from agent.collectors import (
        cgroup_cpu,
        cgroup_memory,
        families,
        oncpu,
        perf_syscalls,
        pressure,
        sched,
        schedstat,
        syscalls,
    )

    files = [cgroup_cpu.FACTORY, cgroup_memory.FACTORY, pressure.FACTORY]  # every mode reads the cgroup files
    if mode == BPF:
        return [syscalls.FACTORY, sched.FACTORY, families.FACTORY, oncpu.FACTORY, *files]
    if mode == PERF:
        return [perf_syscalls.FACTORY, schedstat.FACTORY, *files]
    return [schedstat.FACTORY, *files]


def needs_bpf(factory: CollectorFactory) -> bool:
    """Whether *factory* is one of bpf mode's own collectors, which the other modes replace or go without (the cgroup
    files' collectors run alike in every mode)."""
    return factory not in factories(PERF) and factory not in factories(PROCFS)


def perf_availability(facts: MachineFacts) -> Availability:
    """Whether counting perf events per cgroup can be opened here."""
    from agent.collectors import perf_syscalls

    return perf_syscalls.check(facts)


def choose(requested: str, facts: MachineFacts, bpf_error: str | None = None) -> ModeChoice:
    """The mode for *requested* (auto, bpf, perf, procfs). *bpf_error*: BPF was tried and no program loaded."""
    if requested != "auto":
        missing = kernel_gaps(facts.release) if requested == BPF else MISSING[requested]
        return ModeChoice(requested, "asked for with --mode", missing, _fix_for(requested, facts))
    bpf = Availability(False, f"the BPF programs failed to load: {bpf_error}") if bpf_error else None
    bpf = bpf or bpf_support(facts)
    if bpf.ok:
        return ModeChoice(BPF, "the BPF programs can be loaded here", kernel_gaps(facts.release))
    perf = perf_availability(facts)
    if perf.ok:
        return ModeChoice(PERF, f"BPF cannot run: {bpf.reason}", MISSING[PERF], _bpf_fix(bpf))
    return ModeChoice(
        PROCFS,
        f"BPF cannot run: {bpf.reason}; perf counters cannot either: {perf.reason}",
        MISSING[PROCFS],
        f"for perf mode: {perf.fix}; for bpf mode: {_bpf_fix(bpf)}",
    )


def without_bpf(facts: MachineFacts) -> str:
    """The mode auto counts in where BPF does not serve: perf when its counters can be opened, else procfs."""
    return PERF if perf_availability(facts).ok else PROCFS


def _bpf_fix(bpf: Availability) -> str:
    return bpf.fix or "see `schedwatch check --mode bpf`"


def _fix_for(mode: str, facts: MachineFacts) -> str:
    if mode == BPF:
        return ""
    bpf = bpf_support(facts)
    return "run with --mode auto or bpf" if bpf.ok else f"for bpf mode: {_bpf_fix(bpf)}"
