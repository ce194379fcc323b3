"""The fix for each cause, in words a person can apply, with the numbers and the library's own knobs filled in."""

from __future__ import annotations

import math
from collections.abc import Iterable

from agent.diagnosis import pools
from agent.diagnosis.facts import LibraryView, ProcessView, WorkloadView
from agent.diagnosis.findings import Fix


def threads_per_process(cpus: float | None, workers: int) -> int | None:
    """CPUs it may use shared among its pool workers, at least 1; None when the CPUs are unknown."""
    if cpus is None:
        return None
    return max(1, math.floor(cpus / max(1, workers)))


def pool_variables(libraries: Iterable[LibraryView] | None) -> tuple[str, ...]:
    """Variables to set (from each mapped library's row of the pool table), in a stable order: each library's own,
    then OMP_NUM_THREADS."""
    names = list(
        dict.fromkeys(name for library in libraries or () for name in pools.variables_of(library.implementation))
    )
    if not names:
        names = list(pools.unmapped_variables())
    return tuple(sorted(names, key=lambda name: name == pools.OMP_NUM_THREADS))


def _already_set(processes: Iterable[ProcessView], names: tuple[str, ...]) -> list[str]:
    seen: dict[tuple[str, str], list[int]] = {}
    for process in processes:
        for name, value in process.environment or ():
            if name in names:
                seen.setdefault((name, value), []).append(process.pid)
    return [f"{name}={value} is set in pid {', '.join(map(str, pids[:5]))}" for (name, value), pids in seen.items()]


# What would give the number of threads per worker, by the fact missing.
CPUS_WOULD_TELL = "its CPUs: `nproc` there, or top (press 1), `mpstat -P ALL 1 1` or /proc/stat saved there (--cpus N)"
WORKERS_WOULD_TELL = "its pool workers: how many processes its pool starts, e.g. Pool(14) (--workers N)"


def pool_fix(
    workload: WorkloadView,
    cpus: float | None,
    workers: int | None,
    libraries: tuple[LibraryView, ...] | None,
    spin: bool,
) -> Fix:
    """Cap each worker's pool so that workers x threads fit the CPUs it may use. *workers*: the pool workers the rule
    saw (None: none seen); the workers told or counted on the node (the workload's pool_workers) win, and a workload
    whose processes were not read (series of another machine) has only those. Without the CPUs or the workers, no
    number: the formula, and what would give it."""
    if workload.pool_workers:
        workers = workload.pool_workers
    elif workload.processes is None and not workload.pools:
        workers = None
    threads = threads_per_process(cpus, workers) if workers else None
    count = str(threads) if threads is not None else "N"
    names = pool_variables(libraries)
    implementations = {library.implementation for library in libraries or ()}
    where = (
        "in the environment of the workload (Kubernetes: env of the container; Docker: -e NAME=VALUE)"
        if threads is not None
        else "in the environment of the workload (Kubernetes: env of the container; Docker: -e NAME=VALUE), "
        "where N = the CPUs it may use / its pool workers, at least 1 (e.g. 32 CPUs and 14 workers: N=2)"
    )
    set_them = "Set " + ", ".join(f"{name}={count}" for name in names) + " " + where
    if threads is not None and cpus is not None and workers:
        plural = "s" if workers != 1 else ""
        set_them += (
            f", so that {workers} worker{plural} x {count} thread{'s' if threads != 1 else ''} fit {cpus:g} CPUs"
        )
    steps = [
        set_them + ".",
        f"Or in Python, in the Pool initializer: threadpoolctl.threadpool_limits({count}) (pip install threadpoolctl).",
    ]
    if "torch" in implementations:
        steps.append(f"PyTorch: torch.set_num_threads({count}) in each worker.")
    if spin and implementations & pools.reading("OMP_WAIT_POLICY"):
        steps.append("OpenMP: OMP_WAIT_POLICY=passive makes idle threads sleep instead of spinning.")
    for note in _already_set(workload.processes or (), names):
        steps.append(f"Now {note}: that value is what the pools use; lower it to {count}.")
    steps.append("Check it with `schedwatch verify -- <the command>` before rolling it out.")
    variables = {name: count for name in names} if threads is not None else {}
    size = (
        f"{count} thread{'s' if threads != 1 else ''}"
        if threads is not None
        else "N threads, N = the CPUs it may use / its pool workers, at least 1"
    )
    missing = (
        ()
        if threads is not None
        else tuple(
            would_tell for known, would_tell in ((cpus, CPUS_WOULD_TELL), (workers, WORKERS_WOULD_TELL)) if not known
        )
    )
    return Fix(
        summary=f"Limit each worker's thread pool to {size} ({', '.join(names)}).",
        steps=tuple(steps),
        variables=variables,
        threads_per_process=threads,
        missing=missing,
    )


def runqueue_fix(cpus: float | None, wanted: float | None) -> Fix:
    """More runnable threads than CPUs, no pool: fewer workers or more CPUs."""
    cpus_text = "its CPUs" if cpus is None else f"{cpus:g} CPUs"
    wanted_text = "more threads" if wanted is None else f"{wanted:.1f} threads on average"
    target = None if cpus is None else max(1, math.floor(cpus))
    return Fix(
        summary=(
            f"{wanted_text} want {cpus_text}: run at most {target or 'one worker per CPU'} CPU-bound workers, "
            "or give it more CPUs."
        ),
        steps=(
            f"Lower the worker count (processes or threads doing CPU work) to {target or 'the CPUs it may use'}.",
            "Or raise its CPU limit (Kubernetes: resources.limits.cpu) or move it to a node with more CPUs.",
        ),
    )


def throttling_fix(limit: float | None, demand: float | None) -> Fix:
    """The quota is below what the workload uses: raise it, or use fewer threads."""
    if limit is not None and demand is not None:
        target = math.ceil(max(demand, limit * 1.25) * 2) / 2
        summary = f"Raise its CPU limit from {limit:g} to at least {target:g} CPUs, or make it use fewer threads."
    else:
        summary = "Raise its CPU limit above its steady use, or make it use fewer threads."
    return Fix(
        summary=summary,
        steps=(
            summary,
            "Kubernetes: resources.limits.cpu; Docker: --cpus. Thread pools sized to the node's CPUs burn a quota "
            "fast: size them to the limit.",
        ),
    )


def convoy_fix() -> Fix:
    """Threads queue on a lock: shorten what is done while holding it."""
    return Fix(
        summary="Threads queue on a lock: hold it for less time, or split it.",
        steps=(
            "Find the lock: `py-spy dump --pid PID` (Python) or `perf record -g -p PID` shows where the waiting "
            "threads stand.",
            "Move work out of the critical section, shard the lock, or use fewer threads contending for it.",
        ),
    )
