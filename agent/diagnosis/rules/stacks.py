"""Causes read from stacks: what the stack classifier's groups (a workload's ``stacks``) prove.

- A thread-pool library's threads yielding or spinning: ``thread-pool-oversubscription`` with the library's variable
  and its fix (the stacks name the pool; they cannot say how many threads share how many CPUs, so never high).
- Threads waiting in an allocator's own lock: ``allocator-contention`` with the allocator's fix.
- Threads of the program queued on its own lock (a mutex wait, or sched_yield in a function that locks):
  ``futex-contention`` / ``lock-convoy`` naming the function.

How sure: a dump is one moment (its weight is threads), a profile a share of samples. Thin evidence (few threads, few
samples) gives the finding at low confidence and the command that would confirm it; a single pool thread yielding is
a pool's normal wait and stays an observation (rules/code.py).
"""

from __future__ import annotations

import re

from agent.diagnosis.allocators import GLIBC, JEMALLOC, MIMALLOC, TCMALLOC
from agent.diagnosis.facts import LibraryView, NodeView, StackEvidence, StackGroup, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.pools import BY_IMPLEMENTATION
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.fixes import pool_fix
from agent.diagnosis.rules.pool import EXPLANATIONS
from agent.diagnosis.rules.signals import cpus_allowed
from agent.diagnosis.rules.thresholds import Thresholds

DUMPS = ("threads", "stacks")  # one moment: a stack per thread (or per stack pasted, threads not named)
POOL_LEAVES = {"yield": Mechanism.YIELD_STORM, "spin": Mechanism.USER_SPACE_SPIN}
LOCKISH = re.compile(r"lock|mutex|latch|acquire|critical|synchron", re.IGNORECASE)  # not "spin": a loop
CONFIRM_POOL = (
    "perf trace -s -p PID -- sleep 10 (sched_yield calls per thread: a pool storm is 100,000 and more per thread)",
    "grep -E 'Threads|Cpus_allowed_list' /proc/PID/status (the pool's threads against the CPUs it may use)",
    "run `schedwatch diagnose` on the node while it is slow (yields per second, pool workers, libraries)",
)
CONFIRM_LOCK = (
    "three dumps a second apart (gdb -p PID -batch -ex 'thread apply all bt'): the same threads in the same lock "
    "each time is a convoy, not a moment",
    "perf trace -s -p PID -- sleep 10 (futex calls and the time threads wait in them)",
)
ALLOCATOR_EXPLANATION = (
    "Threads of this workload wait in the memory allocator's own lock: they allocate or free from several threads "
    "at once and queue on a lock the allocator shares between them, so allocation-heavy code runs one thread at a "
    "time whatever the CPUs."
)
CONVOY_EXPLANATION = (
    "Threads of this workload queue on one of its own locks: while one holds it the others wait in the lock (a "
    "futex wait, or sched_yield in a spin), so the code under it runs one thread at a time whatever the CPUs."
)


def _strength(stacks: StackEvidence, groups: list[StackGroup], limits: Thresholds) -> Confidence | None:
    """How sure *groups* (of one kind) make a finding: None when they are too few to name anything."""
    weight = sum(group.weight for group in groups)
    if stacks.unit in DUMPS:
        if weight < limits.stack_threads_thin:
            return None
        return Confidence.MEDIUM if weight >= limits.stack_threads else Confidence.LOW
    if stacks.unit in ("samples", "calls", "profile rows") and stacks.total > 0:
        share = weight / stacks.total
        if share < limits.stack_share:
            return None
        return Confidence.MEDIUM if stacks.total >= limits.stack_samples else Confidence.LOW
    return None


def _weight_evidence(stacks: StackEvidence, groups: list[StackGroup], what: str, limits: Thresholds) -> Evidence:
    weight = sum(group.weight for group in groups)
    if stacks.unit in DUMPS:
        return evidence(
            f"{stacks.unit} {what}",
            weight,
            stacks.unit,
            f"of {stacks.total:g} dumped; {limits.stack_threads} or more for medium confidence",
        )
    return evidence(
        f"{stacks.unit} {what}",
        100 * weight / stacks.total,
        "%",
        f"of {stacks.total:g} {stacks.unit}; bar {100 * limits.stack_share:g} %",
    )


def _functions(groups: list[StackGroup]) -> str:
    names = list(dict.fromkeys(f"{group.function or '?'} ({group.library})" for group in groups))
    return ", ".join(names[:3])


def pool_finding(workload: WorkloadView, node: NodeView, limits: Thresholds) -> Finding | None:
    """A pool library's threads yielding or spinning in the stacks: the pool cause, with its library's fix."""
    stacks = workload.stacks
    if stacks is None:
        return None
    groups = [group for group in stacks.groups if group.owner == "pool" and group.leaf in POOL_LEAVES]
    if not groups:
        return None
    confidence = _strength(stacks, groups, limits)
    if confidence is None:
        return None
    busiest = max(groups, key=lambda group: group.weight)
    mechanism = POOL_LEAVES[busiest.leaf]
    implementations = list(dict.fromkeys(group.implementation for group in groups if group.implementation))
    libraries = tuple(
        LibraryView(BY_IMPLEMENTATION[name].api, name, None) for name in implementations if name in BY_IMPLEMENTATION
    )
    doing = "yielding (sched_yield)" if mechanism is Mechanism.YIELD_STORM else "spinning in user space"
    found = [_weight_evidence(stacks, groups, f"in {_functions(groups)} {doing}", limits)]
    fix = pool_fix(workload, cpus_allowed(workload, node), None, libraries, spin=mechanism is not Mechanism.YIELD_STORM)
    return Finding(
        cause=Cause.THREAD_POOL_OVERSUBSCRIPTION,
        mechanism=mechanism,
        workload=workload.ref,
        processes=(),
        libraries=tuple(sorted(implementations)),
        evidence=tuple(found),
        confidence=confidence,
        fix=fix,
        explanation=EXPLANATIONS[mechanism]
        + " The stacks show the pool's threads waiting so; they do not show how many threads share how many CPUs.",
        collect_next=CONFIRM_POOL,
    )


def allocator_fix(allocator: str) -> Fix:
    """Fewer trips to the shared lock: more arenas or per-thread caches, or an allocator built for threads."""
    steps: tuple[str, ...]
    if allocator == TCMALLOC.name:
        summary = "Let each thread keep more freed memory so it goes to tcmalloc's shared free lists less often."
        steps = (
            "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=268435456 (256 MiB; gperftools' default is 32 MiB) in the "
            "environment of the workload.",
            "Or a tcmalloc with per-CPU caches (Google's tcmalloc), or jemalloc (LD_PRELOAD=libjemalloc.so.2).",
        )
    elif allocator == GLIBC.name:
        summary = "Give glibc malloc's threads arenas of their own, or use an allocator with per-thread caches."
        steps = (
            "Unset MALLOC_ARENA_MAX, or set it to 8 x the CPUs (glibc's own cap): a low value makes threads share "
            "arenas and their locks.",
            "Or jemalloc (LD_PRELOAD=libjemalloc.so.2) or tcmalloc (LD_PRELOAD=libtcmalloc_minimal.so.4), built for "
            "many threads allocating at once.",
        )
    elif allocator == JEMALLOC.name:
        summary = "Give jemalloc more arenas, one per CPU, so threads stop sharing their locks."
        steps = ("MALLOC_CONF=percpu_arena:percpu,narenas:<4 x CPUs> in the environment of the workload.",)
    elif allocator == MIMALLOC.name:
        summary = "Let mimalloc's threads keep their own heaps: a newer mimalloc, or fewer frees across threads."
        steps = ("Free memory on the thread that allocated it where the code allows; mimalloc 2.x.",)
    else:
        summary = "Use an allocator with per-thread caches (jemalloc, tcmalloc)."
        steps = ("LD_PRELOAD=libjemalloc.so.2 or libtcmalloc_minimal.so.4.",)
    return Fix(
        summary=summary,
        steps=(*steps, "Or allocate less in the hot loop: reuse buffers and objects across iterations."),
    )


def allocator_finding(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """Threads in an allocator's own lock: allocator contention, with the allocator's fix."""
    stacks = workload.stacks
    if stacks is None:
        return None
    groups = [group for group in stacks.groups if group.leaf == "allocator-lock"]
    if not groups:
        return None
    weight = sum(group.weight for group in groups)
    if stacks.unit in DUMPS:
        # A thread in a lock's slow path means another held it: one is evidence, thin, of contention.
        confidence = Confidence.MEDIUM if weight >= limits.stack_threads else Confidence.LOW
    else:
        found_confidence = _strength(stacks, groups, limits)
        if found_confidence is None:
            return None
        confidence = found_confidence
    busiest = max(groups, key=lambda group: group.weight)
    allocator = busiest.implementation or "the allocator"
    shown = (_weight_evidence(stacks, groups, f"in {allocator}'s lock ({_functions(groups)})", limits),)
    return workload_finding(
        workload,
        cause=Cause.ALLOCATOR_CONTENTION,
        mechanism=Mechanism.ALLOCATOR_LOCK,
        evidence=shown,
        confidence=confidence,
        fix=allocator_fix(allocator),
        explanation=ALLOCATOR_EXPLANATION,
        collect_next=()
        if confidence is Confidence.MEDIUM
        else (
            "perf record -g -p PID -- sleep 10; perf report --stdio --no-children --sort sym (the share of samples "
            f"in {allocator}'s lock)",
            CONFIRM_LOCK[0],
        ),
    )


def convoy_fix(function: str) -> Fix:
    """Threads queue on the lock taken in *function*: hold it for less time, or split it."""
    return Fix(
        summary=f"Threads queue on the lock taken in {function}: hold it for less time, or split it.",
        steps=(
            f"Move work out of the critical section in {function} (compute first, lock only to publish).",
            "Shard the lock (one per bucket or per thread, merged at the end), or use fewer threads contending for it.",
        ),
    )


def convoy_finding(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """The program's own lock with threads queued on it (mutex waits, or yields in a locking function)."""
    stacks = workload.stacks
    if stacks is None:
        return None
    by_function: dict[tuple[str, str], list[StackGroup]] = {}
    for group in stacks.groups:
        if group.owner != "program" or group.function is None:
            continue
        if group.leaf == "lock" or (group.leaf in ("yield", "spin") and LOCKISH.search(group.function)):
            by_function.setdefault((group.library, group.function), []).append(group)
    if not by_function:
        return None
    (library, function), groups = max(by_function.items(), key=lambda item: sum(g.weight for g in item[1]))
    confidence = _strength(stacks, groups, limits)
    if confidence is None:
        return None
    shown = (_weight_evidence(stacks, groups, f"waiting for the lock in {function} ({library})", limits),)
    return workload_finding(
        workload,
        cause=Cause.FUTEX_CONTENTION,
        mechanism=Mechanism.LOCK_CONVOY,
        evidence=shown,
        confidence=confidence,
        fix=convoy_fix(function),
        explanation=CONVOY_EXPLANATION,
        collect_next=CONFIRM_LOCK,
    )
