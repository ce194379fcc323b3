"""Small helpers shared by the rules: evidence wording, the names of libraries and processes, and a finding about one
workload."""

from __future__ import annotations

from agent.diagnosis.facts import LibraryView, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism

COLLECT_LIVE = "run `schedwatch diagnose` on the node while it is slow (exact counts, libraries and thread variables)"
COLLECT_MAPS = "`grep -E 'blas|omp|mkl|tbb|torch' /proc/PID/maps` of one worker (which thread-pool library it loaded)"
# Mechanisms whose findings explain time in the kernel (their evidence names the calls), or say what to collect to
# explain it (unexplained system time): no observation says the same again.
KERNEL_TIME_MECHANISMS = frozenset(
    {
        Mechanism.YIELD_STORM,
        Mechanism.FUTEX_HANDOFF,
        Mechanism.NO_VDSO_CLOCK_SOURCE,
        Mechanism.VDSO_BYPASSED,
        Mechanism.CLOCK_SYSCALLS,
        Mechanism.SHORT_SLEEPS,
        Mechanism.SHORT_POLL_TIMEOUTS,
        Mechanism.SHORT_LIVED_PROCESSES,
        Mechanism.UNMAP_REFAULT,
        Mechanism.RECLAIM,
        Mechanism.SYSTEM_TIME,
    }
)
COLLECT_THREADPOOLCTL = "`python -m threadpoolctl -i numpy` in the container (library, version and thread count)"


def evidence(fact: str, value: float, unit: str, compared_with: str) -> Evidence:
    """One number and what it was compared with."""
    return Evidence(fact=fact, value=round(value, 3), unit=unit, compared_with=compared_with)


def library_names(libraries: tuple[LibraryView, ...] | None) -> tuple[str, ...]:
    """ "openblas 0.3.23.dev", ... sorted and unique."""
    return tuple(
        sorted(
            {f"{lib.implementation} {lib.version}" if lib.version else lib.implementation for lib in libraries or ()}
        )
    )


def workload_finding(
    workload: WorkloadView,
    *,
    cause: Cause,
    mechanism: Mechanism,
    evidence: tuple[Evidence, ...],
    confidence: Confidence,
    fix: Fix,
    explanation: str,
    collect_next: tuple[str, ...] = (),
) -> Finding:
    """A finding about *workload*, naming its processes and the thread-pool libraries they loaded."""
    return Finding(
        cause=cause,
        mechanism=mechanism,
        workload=workload.ref,
        processes=tuple(process.pid for process in workload.processes or ()),
        libraries=library_names(workload.libraries),
        evidence=evidence,
        confidence=confidence,
        fix=fix,
        explanation=explanation,
        collect_next=collect_next,
    )
