"""Numbers derived from one workload's view, each None when a fact it needs is unknown."""

from __future__ import annotations

from dataclasses import dataclass

from agent.diagnosis.views import LibraryView, NodeView, ProcessView, ThreadView, WorkloadView

WAIT_OPS = ("wait", "waitv", "lock_pi")


@dataclass(frozen=True)
class Signals:
    """What the rules judge a workload by."""

    cpus: float | None  # CPUs it may use
    yields_per_cpu: float | None  # per second per CPU
    yielding_threads: tuple[ThreadView, ...]  # threads that yielded at least the per-thread bar (no-clock sources)
    runqueue_per_cpu: float | None  # seconds waiting per second per CPU
    busy_share: float | None  # CPU used / CPUs it may use
    futex_per_cpu: float | None  # calls per second per CPU
    futex_waits_per_second: float | None
    futex_wakes_per_second: float | None
    blocked_threads: float | None  # futex wait seconds per second: threads blocked on average
    throttled_share: float | None
    pool_libraries: tuple[LibraryView, ...] | None  # None: maps not read
    pool_processes: tuple[ProcessView, ...]  # processes with a pool library mapped
    pool_threads: int | None  # threads of those processes together

    @property
    def pool_threads_over_cpus(self) -> bool | None:
        """More threads in pool processes than CPUs it may use; None when unknown."""
        if self.pool_threads is None or self.cpus is None:
            return None
        return self.pool_threads > self.cpus


def cpus_allowed(workload: WorkloadView, node: NodeView) -> float | None:
    """The workload's CPUs: its own figure, else the node's."""
    if workload.cpus_allowed is not None:
        return workload.cpus_allowed
    return float(node.cpus) if node.cpus else None


def _per_cpu(value: float | None, cpus: float | None) -> float | None:
    return None if value is None or not cpus else value / cpus


def signals(workload: WorkloadView, node: NodeView, yields_per_thread: int) -> Signals:
    """The derived numbers of *workload* on *node*."""
    cpus = cpus_allowed(workload, node)
    futex = workload.futex_calls
    waits = None if futex is None else sum(futex.get(op, 0.0) for op in WAIT_OPS)
    wakes = None if futex is None else futex.get("wake", 0.0) + futex.get("requeue", 0.0)
    throttled = None
    if workload.throttled_periods is not None and workload.periods:
        throttled = workload.throttled_periods / workload.periods
    busy = None
    if workload.cpu_used_cores is not None and cpus:
        busy = workload.cpu_used_cores / cpus
    pool_libraries = workload.libraries
    pool_pids = {pid for library in pool_libraries or () for pid in library.pids}
    processes = workload.processes or ()
    pool_processes = tuple(process for process in processes if process.pid in pool_pids or process.libraries)
    pool_threads = None
    if workload.processes is not None and pool_processes and all(p.threads is not None for p in pool_processes):
        pool_threads = sum(process.threads or 0 for process in pool_processes)
    yielding = tuple(
        thread for thread in workload.thread_views or () if (thread.sched_yield_calls or 0) >= yields_per_thread
    )
    return Signals(
        cpus=cpus,
        yields_per_cpu=_per_cpu(workload.rate(workload.sched_yield_calls), cpus),
        yielding_threads=yielding,
        runqueue_per_cpu=_per_cpu(workload.rate(workload.runqueue_wait_seconds), cpus),
        busy_share=busy,
        futex_per_cpu=_per_cpu(workload.rate(workload.futex_total), cpus),
        futex_waits_per_second=workload.rate(waits),
        futex_wakes_per_second=workload.rate(wakes),
        blocked_threads=workload.rate(workload.futex_wait_seconds),
        throttled_share=throttled,
        pool_libraries=pool_libraries,
        pool_processes=pool_processes,
        pool_threads=pool_threads,
    )
