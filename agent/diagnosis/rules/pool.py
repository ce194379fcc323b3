"""thread-pool-oversubscription: every worker process runs a thread pool sized to all CPUs, so workers x threads
outnumber the CPUs and idle pool threads spin (sched_yield, user space, or futex hand-offs) while others wait."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from agent.diagnosis import pools
from agent.diagnosis.facts import CodeShare, WorkloadView, by_library
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Mechanism, Unchecked
from agent.diagnosis.rules.code import KIND_SHARE, kind_of
from agent.diagnosis.rules.common import COLLECT_LIVE, COLLECT_MAPS, COLLECT_THREADPOOLCTL, evidence, library_names
from agent.diagnosis.rules.fixes import pool_fix
from agent.diagnosis.rules.signals import Signals
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATIONS = {
    Mechanism.YIELD_STORM: (
        "Each worker process runs a BLAS/OpenMP thread pool sized to every CPU, so the pools' threads outnumber the "
        "CPUs; idle pool threads wait for work by calling sched_yield in a loop, which burns system time and takes "
        "the CPU from the threads that have work."
    ),
    Mechanism.USER_SPACE_SPIN: (
        "Each worker process runs a BLAS/OpenMP thread pool sized to every CPU, so the pools' threads outnumber the "
        "CPUs; idle pool threads spin in user space waiting for work (newer OpenBLAS never yields), so threads with "
        "work wait in the run queue while spinners hold the CPUs. top shows busy user time, not system time."
    ),
    Mechanism.FUTEX_HANDOFF: (
        "Each worker process runs an OpenMP/BLAS thread pool sized to every CPU, so the pools' threads outnumber the "
        "CPUs; for every parallel region threads park on a futex and are woken again, and with more threads than CPUs "
        "each hand-off waits for a CPU."
    ),
}


def _workers(signals: Signals) -> int | None:
    """Pool workers: the processes with a pool library that are workers of a pool (a pool's parent maps the library
    too, but hands the work out), else every process with a pool library; None when none was read (not counted)."""
    return len(signals.workers) or None


def _thread_evidence(signals: Signals) -> list[Evidence]:
    threads = signals.yielding_threads
    if not threads:
        return []
    calls = [thread.sched_yield_calls or 0 for thread in threads]
    found = [
        evidence("threads spinning in sched_yield", len(threads), "threads", "a pool storm: 2 or more"),
        evidence(
            "sched_yield calls per spinning thread (median)",
            statistics.median(calls),
            "calls",
            "healthy: ~0; tracers slow the loop, so the real count is higher",
        ),
    ]
    seconds = [thread.sched_yield_seconds for thread in threads if thread.sched_yield_seconds is not None]
    if seconds:
        found.append(
            evidence("time in sched_yield per spinning thread (median)", statistics.median(seconds), "s", "healthy: ~0")
        )
    longest = [thread.futex_max_seconds for thread in threads if thread.futex_max_seconds is not None]
    if longest:
        found.append(evidence("longest futex wait of those threads", max(longest), "s", "pool threads parked for work"))
    return found


@dataclass(frozen=True)
class PoolCode:
    """A pool library's share of a workload's on-CPU samples, and its spin loop's (the code rule's user-spin or
    sched-yield kinds) where the samples name one."""

    library: str
    share: float  # of every on-CPU sample
    spin: CodeShare | None
    spin_share: float


def pool_code(workload: WorkloadView) -> PoolCode | None:
    """The busiest pool library in the workload's on-CPU samples (diagnosis.pools names them), or None."""
    rows, total = workload.cpu_samples, workload.cpu_samples_total
    if not rows or not total:
        return None
    in_pools = by_library(
        row for row in rows if row.mode == "user" and pools.implementation_of(row.library) is not None
    )
    if not in_pools:
        return None
    library, library_rows = max(in_pools.items(), key=lambda item: sum(row.count for row in item[1]))
    spinning = [row for row in library_rows if (kind := kind_of(row)) is not None and kind.name == "user-spin"]
    spin = max(spinning, key=lambda row: row.count, default=None)
    share = sum(row.count for row in library_rows) / total
    return PoolCode(library, share, spin, spin.count / total if spin is not None else 0.0)


def _code_evidence(code: PoolCode | None, workload: WorkloadView) -> list[Evidence]:
    found = []
    if code is not None:
        found.append(evidence(f"on-CPU samples in {code.library}", 100 * code.share, "%", "of all its samples"))
        if code.spin is not None:
            found.append(
                evidence(
                    f"on-CPU samples spinning in {code.spin.function} ({code.library})",
                    100 * code.spin_share,
                    "%",
                    f"the pool's idle loop; bar {100 * KIND_SHARE:g} %",
                )
            )
    sites = workload.yield_sites
    if sites:
        top = max(sites, key=lambda site: site.count)
        total = sum(site.count for site in sites)
        if top.function and pools.implementation_of(top.library) is not None and total:
            found.append(
                evidence(
                    f"sched_yield calls made from {top.function} ({top.library})",
                    100 * top.count / total,
                    "%",
                    "of its sched_yield calls",
                )
            )
    return found


def check(workload: WorkloadView, signals: Signals, limits: Thresholds) -> Finding | Unchecked | None:
    """The pool cause for one workload, or None when it is not there."""
    by_rate = signals.yields_per_cpu is not None and signals.yields_per_cpu >= limits.yields_per_cpu
    by_threads = signals.yields_per_cpu is None and len(signals.yielding_threads) >= limits.storm_threads
    libraries = signals.pool_libraries
    waiting = signals.runqueue_per_cpu is not None and signals.runqueue_per_cpu >= limits.runqueue_wait_per_cpu
    over = signals.pool_threads_over_cpus
    code = pool_code(workload)
    # The samples name the pool's spin loop: the pool's library is mapped and spinning, whatever the maps said.
    spinning = code is not None and code.spin is not None and code.spin_share >= KIND_SHARE
    mechanism: Mechanism | None = None
    if by_rate or by_threads:
        mechanism = Mechanism.YIELD_STORM
    elif spinning and waiting and over is not False:
        mechanism = Mechanism.USER_SPACE_SPIN
    elif libraries and waiting and over:
        handoffs = signals.futex_per_cpu is not None and signals.futex_per_cpu >= limits.futex_handoffs_per_cpu
        mechanism = Mechanism.FUTEX_HANDOFF if handoffs else Mechanism.USER_SPACE_SPIN
    if mechanism is None:
        unsplit = workload.seconds is None and workload.thread_views is None
        if unsplit and (workload.sched_yield_calls or 0) >= limits.yields_per_thread:
            return Unchecked(
                rule=Cause.THREAD_POOL_OVERSUBSCRIPTION,
                workload=workload.ref,
                missing=(
                    "how long it ran (yields per second)",
                    "which threads yielded (one spinning thread or a pool)",
                ),
                collect_next=(COLLECT_LIVE, "perf trace -s -p PID of one worker for ~10 s (per-thread counts)"),
            )
        if libraries is None and waiting:
            return Unchecked(
                rule=Cause.THREAD_POOL_OVERSUBSCRIPTION,
                workload=workload.ref,
                missing=("the thread-pool libraries its processes mapped",),
                collect_next=(COLLECT_LIVE, COLLECT_MAPS, COLLECT_THREADPOOLCTL),
            )
        return None
    found: list[Evidence] = []
    if signals.yields_per_cpu is not None:
        found.append(
            evidence(
                "sched_yield calls per second per CPU",
                signals.yields_per_cpu,
                "/s",
                f"healthy: below {limits.yields_per_cpu:,.0f}",
            )
        )
    found.extend(_thread_evidence(signals))
    if signals.pool_threads is not None and signals.cpus is not None:
        found.append(
            evidence(
                "threads in processes with a pool library",
                signals.pool_threads,
                "threads",
                f"CPUs it may use: {signals.cpus:g}",
            )
        )
    if signals.runqueue_per_cpu is not None:
        found.append(
            evidence(
                "run-queue wait per CPU",
                signals.runqueue_per_cpu,
                "s/s",
                f"threads waiting for a CPU; bar {limits.runqueue_wait_per_cpu:g}",
            )
        )
    if mechanism is Mechanism.FUTEX_HANDOFF and signals.futex_per_cpu is not None:
        found.append(
            evidence(
                "futex calls per second per CPU",
                signals.futex_per_cpu,
                "/s",
                f"bar {limits.futex_handoffs_per_cpu:,.0f}",
            )
        )
    if workload.system_share is not None:
        found.append(
            evidence("system share of its CPU time", 100 * workload.system_share, "%", "healthy compute: below 10 %")
        )
    found.extend(_code_evidence(code, workload))
    collect: list[str] = []
    if libraries is None and spinning:
        confidence = Confidence.HIGH  # the samples show the pool library's own spin loop on the CPUs
    elif libraries is None:
        confidence = Confidence.MEDIUM
        collect.extend((COLLECT_LIVE, COLLECT_MAPS, COLLECT_THREADPOOLCTL))
    elif not libraries:
        confidence = Confidence.LOW
        collect.append("no known thread-pool library is mapped: " + COLLECT_THREADPOOLCTL)
    elif mechanism is Mechanism.YIELD_STORM and over is False:
        confidence = Confidence.MEDIUM
    else:
        confidence = Confidence.HIGH
    workers = _workers(signals)
    return Finding(
        cause=Cause.THREAD_POOL_OVERSUBSCRIPTION,
        mechanism=mechanism,
        workload=workload.ref,
        processes=tuple(sorted(process.pid for process in signals.pool_processes)),
        libraries=library_names(libraries),
        evidence=tuple(found),
        confidence=confidence,
        fix=pool_fix(workload, signals.cpus, workers, libraries, spin=mechanism is not Mechanism.YIELD_STORM),
        explanation=EXPLANATIONS[mechanism],
        collect_next=tuple(collect),
    )
