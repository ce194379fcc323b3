"""The fix `schedwatch verify` applies: thread variables, their count from a diagnosis of the first run; or, when
that diagnosis names allocator churn and no thread pool, the allocator variables its fix names."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from agent.diagnosis import rules
from agent.diagnosis.facts import Facts, NodeView, PoolView, Workload, WorkloadView
from agent.diagnosis.findings import Cause, Diagnosis
from agent.diagnosis.inputs.live.details import library_views, process_views
from agent.diagnosis.inputs.processes.workload import WorkloadFacts
from agent.diagnosis.pools import COUNT_VARIABLES
from agent.verification.runner import FACTS_AFTER_SECONDS, Run

# Every thread-count variable of the pool table; the fix sets each to the same count.
THREAD_VARIABLES = COUNT_VARIABLES


@dataclass(frozen=True)
class Recommendation:
    """The variables of the fix and where their value came from."""

    variables: dict[str, str]
    source: str  # how the count was chosen, in words
    finding: str | None = None  # cause/mechanism of the diagnosis the count came from


def recommend(first: Run, facts: WorkloadFacts | None, cpus: float, quota: float | None) -> Recommendation:
    """The thread variables to set: from a diagnosis of the first run, else CPUs / pool workers, else 1."""
    if facts is not None:
        diagnosis = rules.diagnose(_facts_of(first, facts, cpus, quota))
        uncounted = None  # a pool finding whose fix could not count the workers: its formula
        for finding in diagnosis.findings:
            variables = dict(finding.fix.variables)
            if finding.cause is Cause.THREAD_POOL_OVERSUBSCRIPTION and variables:
                count = next(iter(variables.values()))
                return Recommendation(
                    {name: count for name in THREAD_VARIABLES},
                    f"the diagnosis of the first run: {finding.fix.summary}",
                    f"{finding.cause.value}/{finding.mechanism.value}",
                )
            if finding.cause is Cause.THREAD_POOL_OVERSUBSCRIPTION and uncounted is None:
                uncounted = finding
        for finding in diagnosis.findings:
            if finding.cause is Cause.ALLOCATOR_CHURN and finding.fix.variables:
                return Recommendation(
                    dict(finding.fix.variables),
                    f"the diagnosis of the first run: {finding.fix.summary}",
                    f"{finding.cause.value}/{finding.mechanism.value}",
                )
        workers = max((pool.size for pool in facts.pools), default=0)
        if workers:
            threads = max(1, math.floor(cpus / workers))
            return Recommendation(
                dict.fromkeys(THREAD_VARIABLES, str(threads)),
                f"{'no workers counted by' if uncounted else 'no pool finding in'} the first run's diagnosis; "
                f"{cpus:g} CPUs / {workers} pool workers = {threads} per process",
                _names(diagnosis),
            )
        if uncounted is not None:
            return Recommendation(
                dict.fromkeys(THREAD_VARIABLES, "1"),
                f"the diagnosis of the first run found an oversubscribed pool but no workers to size it by "
                f"({uncounted.fix.summary}): 1 thread per process, the fewest, tried",
                _names(diagnosis),
            )
        return Recommendation(
            dict.fromkeys(THREAD_VARIABLES, "1"),
            "no pool finding and no pool of workers in the first run: 1 thread per process",
            _names(diagnosis),
        )
    return Recommendation(
        dict.fromkeys(THREAD_VARIABLES, "1"),
        f"the first run ended before its processes could be read (at {FACTS_AFTER_SECONDS:g} s): 1 thread per process",
    )


def _names(diagnosis: Diagnosis) -> str | None:
    return ", ".join(f"{f.cause.value}/{f.mechanism.value}" for f in diagnosis.findings) or None


def _facts_of(run: Run, facts: WorkloadFacts, cpus: float, quota: float | None) -> Facts:
    """The rules' view of the first run: its whole counts over its whole wall time, and its processes."""
    user, system = run.user_seconds, run.system_seconds
    families = run.counts.syscalls_by_family
    used = None if user is None or system is None else user + system
    workload = WorkloadView(
        ref=Workload(cgroup="(verify)"),
        seconds=run.wall_seconds,
        cpus_allowed=cpus,
        cpu_limit_cores=quota,
        cpu_used_cores=used / run.wall_seconds if used is not None and run.wall_seconds else None,
        system_share=system / used if system is not None and used else None,
        threads=run.threads_seen or None,
        sched_yield_calls=run.counts.sched_yield_calls,
        futex_calls=None
        if run.counts.futex_calls is None
        else {op: float(count) for op, count in run.counts.futex_calls.items()},
        futex_wait_seconds=run.counts.futex_wait_seconds,
        runqueue_wait_seconds=run.counts.runqueue_wait_seconds,
        preempted_seconds=run.counts.preempted_seconds,
        user_seconds=user,
        system_seconds=system,
        syscall_calls_by_family=None if families is None else {name: float(n) for name, n in families.items()},
        processes_exited=None if run.counts.processes_exited is None else float(run.counts.processes_exited),
        page_faults=None if run.counts.page_faults is None else float(run.counts.page_faults),
        processes=process_views(facts),
        pools=tuple(PoolView(pool.parent_pid, pool.command, pool.pids) for pool in facts.pools),
        libraries=library_views(facts),
    )
    return Facts(NodeView(cpus=os.cpu_count()), (workload,), sources=("schedwatch verify",))
