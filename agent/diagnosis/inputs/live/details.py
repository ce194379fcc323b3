"""A flagged workload read closely: its processes, pool workers, thread-pool libraries, thread variables and
threads (agent.diagnosis.inputs.processes.workload gathers them), turned into the views the rules read."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from agent.diagnosis.facts import LibraryView, PoolView, ProcessView, ThreadView, WorkloadView
from agent.diagnosis.inputs.live.window import cpus_allowed
from agent.diagnosis.inputs.processes.access import Access
from agent.diagnosis.inputs.processes.workload import WorkloadFacts, gather_workload
from agent.machine.procfs import ProcFS

SAMPLE_SECONDS = 1.0  # processes' CPU use is measured over this long


def process_views(facts: WorkloadFacts) -> tuple[ProcessView, ...]:
    """One view per process alive at both readings."""
    views = []
    for process in facts.sample.processes:
        usage = facts.sample.usage.get(process.pid)
        detail = facts.details.get(process.pid)
        environment = None
        if detail is not None and detail.environment.access is Access.READ:
            environment = detail.environment.values
        views.append(
            ProcessView(
                pid=process.pid,
                ppid=process.ppid,
                comm=process.comm,
                command=process.command,
                threads=process.threads,
                cpu_percent=None if usage is None else usage.percent,
                system_percent=None if usage is None else usage.system_percent,
                affinity=process.affinity,
                libraries=tuple(dict.fromkeys(lib.implementation for lib in detail.libraries)) if detail else (),
                environment=environment,
                children_cpu_percent=None if usage is None else usage.children_percent,
            )
        )
    return tuple(views)


def library_views(facts: WorkloadFacts) -> tuple[LibraryView, ...]:
    """Each distinct library (api, implementation, version) with the processes that map it."""
    found: dict[tuple[str, str, str | None], list[int]] = {}
    for pid, detail in sorted(facts.details.items()):
        for library in detail.libraries:
            pids = found.setdefault((library.api, library.implementation, library.version), [])
            if pid not in pids:
                pids.append(pid)
    return tuple(LibraryView(api, impl, version, tuple(pids)) for (api, impl, version), pids in found.items())


def thread_views(facts: WorkloadFacts) -> tuple[ThreadView, ...]:
    """Each thread's CPU use over the sample."""
    return tuple(
        ThreadView(
            tid=thread.tid,
            comm=thread.comm,
            pid=usage.pid,
            cpu_percent=thread.user_percent + thread.system_percent,
            system_percent=thread.system_percent,
            voluntary_switches_per_second=thread.voluntary_switches_per_second,
        )
        for usage in facts.sample.usage.values()
        for thread in usage.threads
    )


def with_details(view: WorkloadView, facts: WorkloadFacts, node_cpus: int | None) -> WorkloadView:
    """*view* with its processes, pools, libraries and threads, and the CPUs its processes may run on."""
    processes = process_views(facts)
    affinity = tuple(sorted({cpu for process in processes for cpu in process.affinity}))
    return dataclasses.replace(
        view,
        cpus_allowed=cpus_allowed(view.cpu_limit_cores, affinity, node_cpus),
        processes=processes,
        pools=tuple(PoolView(pool.parent_pid, pool.command, pool.pids) for pool in facts.pools),
        libraries=library_views(facts),
        thread_views=thread_views(facts),
    )


def read_closely(
    procfs: ProcFS, view: WorkloadView, pids: Sequence[int], node_cpus: int | None, seconds: float = SAMPLE_SECONDS
) -> WorkloadView:
    """Sample *pids* (the workload's processes) and add what they are to *view*."""
    return with_details(view, gather_workload(procfs, pids, seconds), node_cpus)
