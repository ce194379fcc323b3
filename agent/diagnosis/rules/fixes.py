"""The fix for each cause, in words a person can apply, with the numbers and the library's own knobs filled in."""

from __future__ import annotations

import math
from collections.abc import Iterable

from agent.diagnosis import pools
from agent.diagnosis.facts import LibraryView, ProcessView, WorkloadView
from agent.diagnosis.findings import Fix


def threads_per_process(cpus: float | None, workers: int) -> int | None:
    """CPUs it may use shared among its *workers* (at least 1), at least 1; None when the CPUs are unknown."""
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


# What would give each number a pool fix needs, said where it was not known (the fix then gives the formula).
WORKERS_UNKNOWN = (
    "its pool workers were not counted here: `schedwatch diagnose` on its node counts them while it runs (the "
    "processes sharing one parent and command; `ps -o pid,ppid,comm --ppid PARENT` lists them); analyze and "
    "compare take them as --workers N"
)
CPUS_UNKNOWN = (
    "the CPUs it may use are not known here: its CPU limit (Kubernetes: resources.limits.cpu), else its cpuset, "
    "else the node's CPUs (`nproc` inside it; a top with 1 pressed or mpstat -P ALL saved there shows them); "
    "analyze and compare take them as --cpus N"
)
EXAMPLE = "e.g. 32 CPUs and 14 workers: N=2"


def pool_formula(cpus: float | None, workers: int | None) -> str:
    """'N = <CPUs> / <workers>, at least 1' with each number that is known filled in."""
    cpus_text = "the CPUs it may use" if cpus is None else f"{cpus:g} CPUs"
    workers_text = "its pool workers" if workers is None else f"{workers} worker{'s' if workers != 1 else ''}"
    example = f" ({EXAMPLE})" if cpus is None and workers is None else ""
    return f"N = {cpus_text} / {workers_text}, at least 1{example}"


def pool_fix(
    workload: WorkloadView,
    cpus: float | None,
    workers: int | None,
    libraries: tuple[LibraryView, ...] | None,
    spin: bool,
) -> Fix:
    """Cap each worker's pool so that workers x threads fit the CPUs it may use.

    *workers* are the pool workers counted among its processes (None: not counted: its processes were not read, or
    none was left to read); without them, the workers its node counted (schedwatch_pool_workers). A number that is
    still unknown is never assumed: the fix gives the formula with what is known, and says what would give the rest.
    """
    if not workers:  # not counted (0 from a caller that cannot count them is not a count either)
        workers = workload.pool_workers or None
    threads = threads_per_process(cpus, workers) if workers is not None else None
    count = str(threads) if threads is not None else "N"
    names = pool_variables(libraries)
    implementations = {library.implementation for library in libraries or ()}
    where = "in the environment of the workload (Kubernetes: env of the container; Docker: -e NAME=VALUE)"
    set_them = "Set " + ", ".join(f"{name}={count}" for name in names) + " " + where
    if threads is not None and cpus is not None and workers is not None:
        plural = "s" if workers != 1 else ""
        set_them += (
            f", so that {workers} worker{plural} x {count} thread{'s' if threads != 1 else ''} fit {cpus:g} CPUs"
        )
    else:
        set_them += f", where {pool_formula(cpus, workers)}"
    steps = [set_them + "."]
    unknown = [text for text, missing in ((WORKERS_UNKNOWN, workers is None), (CPUS_UNKNOWN, cpus is None)) if missing]
    if unknown:
        steps.append("For N: " + "; ".join(unknown) + ".")
    steps.append(
        f"Or in Python, in the Pool initializer: threadpoolctl.threadpool_limits({count}) (pip install threadpoolctl)."
    )
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
        else f"N threads, {pool_formula(cpus, workers)}"
    )
    return Fix(
        summary=f"Limit each worker's thread pool to {size} ({', '.join(names)}).",
        steps=tuple(steps),
        variables=variables,
        threads_per_process=threads,
        missing=tuple(unknown),
    )


def runqueue_fix(cpus: float | None, wanted: float | None) -> Fix:
    """More runnable threads than CPUs, no pool: fewer workers or more CPUs (as many workers as CPUs when those are
    known; otherwise the rule, and what would give the CPUs)."""
    cpus_text = "the CPUs it may use" if cpus is None else f"{cpus:g} CPUs"
    wanted_text = "more threads" if wanted is None else f"{wanted:.1f} threads on average"
    target = None if cpus is None else max(1, math.floor(cpus))
    at_most = (
        "at most one CPU-bound worker per CPU it may use" if target is None else f"at most {target} CPU-bound workers"
    )
    steps = [
        f"Lower the worker count (processes or threads doing CPU work) to {target or 'the CPUs it may use'}.",
        "Or raise its CPU limit (Kubernetes: resources.limits.cpu) or move it to a node with more CPUs.",
    ]
    if target is None:
        steps.append(f"For the count: {CPUS_UNKNOWN}.")
    return Fix(summary=f"{wanted_text} want {cpus_text}: run {at_most}, or give it more CPUs.", steps=tuple(steps))


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
