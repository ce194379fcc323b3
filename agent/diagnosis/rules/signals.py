"""Numbers derived from one workload's view, each None when a fact it needs is unknown."""

from __future__ import annotations

from dataclasses import dataclass

from agent.diagnosis.facts import LibraryView, NodeView, ProcessView, ThreadView, WorkloadView
from agent.diagnosis.rules.thresholds import Thresholds

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
    workers: tuple[ProcessView, ...]  # of those, the pool workers (all of them when there is no worker pool)
    pool_threads: int | None  # threads of the workers together

    @property
    def pool_threads_over_cpus(self) -> bool | None:
        """Multi-threaded workers whose threads together outnumber the CPUs it may use; None when unknown.

        Workers of one thread each are not a pool problem however many there are (that is saturation).
        """
        if self.pool_threads is None or self.cpus is None:
            return None
        widest = max((worker.threads or 0 for worker in self.workers), default=0)
        return widest >= 2 and self.pool_threads > self.cpus


def cpus_allowed(workload: WorkloadView, node: NodeView) -> float | None:
    """The workload's CPUs: its own figure, else the node's."""
    if workload.cpus_allowed is not None:
        return workload.cpus_allowed
    return float(node.cpus) if node.cpus else None


def _per_cpu(value: float | None, cpus: float | None) -> float | None:
    return None if value is None or not cpus else value / cpus


def spinning(thread: ThreadView, yields: int, seconds: float) -> bool:
    """A thread that yielded at least *yields* times or spent *seconds* in sched_yield (sources without a clock).

    Tracers slow a spin loop (perf trace 10-30x): the time in the call survives better than the count.
    """
    return (thread.sched_yield_calls or 0) >= yields or (thread.sched_yield_seconds or 0.0) >= seconds


def signals(workload: WorkloadView, node: NodeView, limits: Thresholds) -> Signals:
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
    pooled = {pid for pool in workload.pools or () for pid in pool.pids}
    workers = tuple(process for process in pool_processes if process.pid in pooled) or pool_processes
    pool_threads = None
    if workload.processes is not None and workers and all(worker.threads is not None for worker in workers):
        pool_threads = sum(worker.threads or 0 for worker in workers)
    yielding = tuple(
        thread
        for thread in workload.thread_views or ()
        if spinning(thread, limits.yields_per_thread, limits.yield_seconds_per_thread)
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
        workers=workers,
        pool_threads=pool_threads,
    )
