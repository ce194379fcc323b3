"""The one stack classifier: every stack any format yields (a debugger's dump, a profile's samples, a tracer's calls,
off-CPU stacks) is sorted by where it stands (its leaf) and whose code put it there (its owner).

The leaf is read from the innermost frames, through the kernel's, the C library's and the runtime's (an interpreter,
the C++ runtime) up to the first frame of other code: ``yield`` (sched_yield), ``allocator-lock`` (an allocator's own
lock, diagnosis.allocators), ``lock`` (a mutex on a futex), ``gil`` (Python's interpreter lock), ``futex`` (a condition,
semaphore or join: waiting for a signal), ``sleep``, ``io`` (poll, epoll, select, reads), ``page-fault``, ``reclaim``
(direct reclaim or compaction inside an allocation), ``preempted`` (off a CPU, still runnable: an off-CPU stack
through the scheduler's preemption), ``idle`` (a CPU with nothing to run), ``spin`` (a spin or pause
loop in user space: a pool's idle loop, a spin lock) or ``running`` (any other code).

The owner is that first frame of other code, matched against the thread-pool table (diagnosis.pools: by file, else by
function) and the allocator table: ``pool``, ``allocator``, ``program`` (the program's own code), ``runtime``,
``kernel`` (a kernel thread's stack) or ``unknown`` (no symbol). Stacks of one leaf and one owner make a
:class:`~agent.diagnosis.facts.StackGroup`; the rules judge the groups, never the frames.

>>> from agent.diagnosis.inputs.artifacts.frames import Frame
>>> stack = (Frame("__sched_yield", "libc.so.6"), Frame("blas_thread_server", "libopenblas.so.0"))
>>> (group,) = classify([Counted(stack, 1.0, thread=7), Counted(stack, 1.0, thread=8)], "threads").groups
>>> (group.leaf, group.owner, group.implementation, group.function, group.weight, group.threads)
('yield', 'pool', 'openblas', 'blas_thread_server', 2.0, 2)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent.diagnosis import allocators, pools
from agent.diagnosis.facts import StackEvidence, StackGroup
from agent.diagnosis.inputs.artifacts import code
from agent.diagnosis.inputs.artifacts.frames import KERNEL_IO, LIBC_FILES, PROGRAM, Frame, wait_of

__all__ = ["Counted", "classify", "leaf_and_owner"]

# Code that stands between a wait and whoever asked for it: the C library's (LIBC_FILES), the runtimes' and the
# Python standard library's waits, locks and queues.
RUNTIME_FUNCTIONS = re.compile(
    r"^__gthread_|^std::(?:condition_variable|__condvar|mutex|unique_lock|thread|"
    r"this_thread|__1::)|^__cxx|^__gnu_cxx::__mutex"
)  # the C++ runtime, inlined
RUNTIME_FILES = re.compile(r"^(?:lib)?python\d|^libstdc\+\+|^libc\+\+|^libgcc|^libjvm|^libuv|^ld-linux|^ld-musl")
PYTHON_LIBRARY = frozenset({"threading.py", "queue.py", "_base.py", "synchronize.py", "connection.py", "selectors.py",
                            "socket.py", "subprocess.py", "thread.py", "process.py", "pool.py", "popen_fork.py",
                            "base_events.py", "events.py", "runners.py", "ssl.py"})  # fmt: skip
PYTHON_WAITS = re.compile(r"^(?:wait|_wait_for_tstate_lock|join|get|put|result|_recv|recv_bytes|acquire|_worker|"
                          r"_handle_workers|_wait_for_updates)$")  # fmt: skip
PYTHON_IO = re.compile(r"^(?:select|poll|epoll|_poll|recv|recvfrom|recv_into|accept|read|readline|readinto|"
                       r"_read_ready|_run_once|run_forever|serve_forever)$")  # fmt: skip
PYTHON_YIELD = re.compile(r"^os_sched_yield$")
GIL = re.compile(r"^take_gil$|^PyEval_RestoreThread$|^PyEval_AcquireThread$|^PyGILState_Ensure$|^drop_gil$")
LOCK = re.compile(r"^__lll_lock_wait$|^__GI___lll_lock_wait$|^_*pthread_mutex_(?:timed|clock)?lock|"
                  r"^lll_mutex_lock|^std::mutex::lock|^std::__1::mutex::lock|^PyThread_acquire_lock|"
                  r"^PyMUTEX_LOCK|^_PyMutex_LockTimed|^__lll_timedlock_wait|^pthread_rwlock_(?:rd|wr|timedrd|timedwr)"
                  r"lock|^__pthread_rwlock_(?:rd|wr)lock|^rwlock_")  # fmt: skip
SPIN = re.compile(r"^pthread_spin_lock$|^__kmp_(?:wait|yield|hyper_barrier|fork_barrier|join_barrier|eq_4|"
                  r"execute_tasks|task_team_wait)|^gomp_(?:team_)?barrier_wait_end$|^gomp_mutex_lock_slow$|^do_spin$|"
                  r"^blas_thread_server$|^inner_thread$|^cpu_relax$|_mm_pause|^spin_?(?:lock|wait|loop)|"
                  r"SpinLock|::spin|^tbb::detail::.*(?:spin|pause|wait)")  # fmt: skip
# Kernel code a stack stands in (innermost kernel frames first)
KERNEL_RECLAIM = re.compile(r"^(?:try_to_free_pages|do_try_to_free_pages|shrink_node|shrink_lruvec|shrink_zones|"
                            r"__alloc_pages_direct_reclaim|__alloc_pages_direct_compact|try_to_compact_pages|"
                            r"compact_zone|__perform_reclaim|try_to_free_mem_cgroup_pages|reclaim_high|"
                            r"mem_cgroup_handle_over_high|kswapd|balance_pgdat)$")  # fmt: skip
KERNEL_FAULT = re.compile(r"^(?:asm_exc_page_fault|exc_page_fault|do_user_addr_fault|__do_page_fault|do_page_fault|"
                          r"page_fault|handle_mm_fault|__handle_mm_fault|do_anonymous_page|handle_pte_fault|"
                          r"do_huge_pmd_anonymous_page|clear_page_erms|clear_page_rep|clear_page|do_fault|"
                          r"filemap_fault)$")  # fmt: skip
KERNEL_YIELD = re.compile(r"^(?:__x64_sys_sched_yield|__ia32_sys_sched_yield|__arm64_sys_sched_yield|sys_sched_yield|"
                          r"do_sched_yield|yield_task_fair|__se_sys_sched_yield)$")  # fmt: skip
KERNEL_FUTEX = re.compile(r"^(?:futex_wait|futex_wait_queue|futex_wait_queue_me|__futex_wait|do_futex|__x64_sys_futex|"
                          r"futex_lock_pi|__se_sys_futex|sys_futex)$")  # fmt: skip
KERNEL_SLEEP = re.compile(r"^(?:do_nanosleep|hrtimer_nanosleep|__x64_sys_nanosleep|__x64_sys_clock_nanosleep|"
                          r"common_nsleep|schedule_hrtimeout_range)$")  # fmt: skip
KERNEL_PREEMPTED = re.compile(r"^(?:preempt_schedule|preempt_schedule_irq|preempt_schedule_common|__cond_resched|"
                              r"_cond_resched|exit_to_user_mode_loop|irqentry_exit_to_user_mode|"
                              r"prepare_exit_to_usermode|retint_kernel)$")  # fmt: skip
KERNEL_IDLE = re.compile(r"^(?:cpuidle_enter_state|cpuidle_enter|intel_idle|default_idle|default_idle_call|"
                         r"native_safe_halt|acpi_idle_do_entry|poll_idle|mwait_idle|arch_cpu_idle|do_idle|"
                         r"cpu_startup_entry)")  # fmt: skip
NEAR = 5  # a wait's markers sit within the first frames outside the kernel
# Of the markers in those frames, the most telling names the leaf: a mutex wait goes through a futex wait.
PRIORITY = ("yield", "gil", "lock", "futex", "sleep", "io")


@dataclass(frozen=True)
class Counted:
    """One stack (innermost frame first), how many samples, calls, threads or seconds it stands for, and its thread
    where the source names it."""

    frames: tuple[Frame, ...]
    weight: float
    thread: int | None = None


def _runtime(frame: Frame) -> bool:
    """Code between a wait and who asked for it: the C library, a runtime, the Python standard library's waits."""
    return frame.library != code.KERNEL and (
        bool(LIBC_FILES.match(frame.library))
        or frame.in_libc
        or bool(RUNTIME_FILES.match(frame.library))
        or frame.library in PYTHON_LIBRARY
        or bool(RUNTIME_FUNCTIONS.search(frame.function or ""))
    )


def _kernel_leaf(frames: tuple[Frame, ...]) -> str | None:
    for frame in frames:
        if frame.library != code.KERNEL:
            return None
        name = frame.function or ""
        for leaf, pattern in (("preempted", KERNEL_PREEMPTED), ("reclaim", KERNEL_RECLAIM),
                              ("page-fault", KERNEL_FAULT), ("yield", KERNEL_YIELD),
                              ("futex", KERNEL_FUTEX), ("sleep", KERNEL_SLEEP), ("io", KERNEL_IO),
                              ("idle", KERNEL_IDLE)):  # fmt: skip
            if pattern.search(name):
                return leaf
    return None


def _user_leaf(frame: Frame) -> str | None:
    name = frame.function or ""
    if PYTHON_YIELD.search(name):
        return "yield"
    if GIL.search(name):
        return "gil"  # the interpreter's lock: its threads take turns, which no lock of the program's explains
    if LOCK.search(name):
        return "lock"
    wait = wait_of(name)
    if wait is not None:
        return wait
    if frame.library in PYTHON_LIBRARY:
        if PYTHON_WAITS.match(name):
            return "futex"
        if PYTHON_IO.match(name):
            return "io"
    return None


def _owner(frame: Frame | None) -> tuple[str, str | None]:
    """(owner kind, the pool's or allocator's row name) of the first frame of other code."""
    if frame is None:
        return "unknown", None
    if frame.library == code.KERNEL:
        return "kernel", None
    pool = pools.implementation_of_frame(frame.library, frame.function)
    if pool is not None:
        return "pool", pool.implementation
    allocator = allocators.allocator_of(frame.library, frame.function)
    if allocator is not None:
        return "allocator", allocator.name
    if frame.function is None and frame.library in (code.UNKNOWN, PROGRAM):
        return "unknown", None
    return "program", None


def _allocator_lock(frames: tuple[Frame, ...]) -> tuple[int, allocators.Allocator] | None:
    """(index of the allocator's outermost frame in the leaf's reach, the allocator) when the stack waits in an
    allocator's own lock: its lock's slow path (or a lock wait) with the allocator's code around it."""
    user = [index for index, frame in enumerate(frames) if frame.library != code.KERNEL][: NEAR + 4]
    locked = next((index for index in user if _lock_frame(frames[index])), None)
    if locked is None:
        return None
    for index in user:
        if index < locked:
            continue
        frame = frames[index]
        allocator = allocators.allocator_of(frame.library, frame.function)
        if allocator is not None and not _lock_frame(frame):
            return index, allocator  # the allocator's code that took the lock (its own lock frames aside)
        if allocator is None and not _runtime(frame) and not _lock_frame(frame):
            return None  # the program's lock, not the allocator's
    return None


def _lock_frame(frame: Frame) -> bool:
    name = frame.function or ""
    return bool(LOCK.search(name)) or any(allocator.lock.search(name) for allocator in allocators.ALLOCATORS)


def leaf_and_owner(frames: tuple[Frame, ...]) -> tuple[str, Frame | None, str, str | None]:
    """(leaf, owning frame, owner kind, the pool's or allocator's row) of one stack, innermost frame first."""
    if not frames:
        return "running", None, "unknown", None
    if (held := _allocator_lock(frames)) is not None:
        index, allocator = held
        return "allocator-lock", frames[index], "allocator", allocator.name
    leaf = _kernel_leaf(frames)  # where the kernel says it stands wins over the user frames' markers
    told_by_kernel = leaf is not None
    owner: Frame | None = None
    user_seen = 0
    for frame in frames:
        if frame.library == code.KERNEL:
            continue
        user_seen += 1
        marker = _user_leaf(frame) if user_seen <= NEAR else None
        better = leaf is None or (not told_by_kernel and PRIORITY.index(marker or "io") < PRIORITY.index(leaf))
        if marker is not None and better:
            leaf = marker  # glibc's futex_wait under __lll_lock_wait under pthread_mutex_lock is a mutex wait
        if not _runtime(frame) and marker is None:  # the call's own wrapper (a static libc's) is nobody's code
            owner = frame
            break
    if owner is None and all(frame.library == code.KERNEL for frame in frames):
        kind, implementation = ("kernel", None)
        owner = frames[-1]
        return leaf or "running", owner, kind, implementation
    if leaf is None:
        first = next((frame for frame in frames if frame.library != code.KERNEL), None)
        leaf = "spin" if first is not None and SPIN.search(first.function or "") else "running"
    user = [frame for frame in frames if frame.library != code.KERNEL]
    if owner is None and len(user) >= 2 and user[-1].function is not None:
        return leaf, user[-1], "runtime", None  # the runtime's own thread (an executor's worker, a GC thread)
    kind, implementation = _owner(owner)
    return leaf, owner, kind, implementation


def classify(stacks: Iterable[Counted], unit: str) -> StackEvidence | None:
    """Every stack sorted into groups of one leaf and one owner, busiest first; None without stacks."""
    weights: dict[tuple[str, str, str, str | None, str | None], float] = {}
    threads: dict[tuple[str, str, str, str | None, str | None], set[int]] = {}
    every: set[int] = set()
    total = 0.0
    told = True
    seen = False
    for stack in stacks:
        if not stack.frames:
            continue
        seen = True
        leaf, owner, kind, implementation = leaf_and_owner(stack.frames)
        key = (leaf, kind, owner.library if owner else code.UNKNOWN, owner.function if owner else None, implementation)
        weights[key] = weights.get(key, 0.0) + stack.weight
        total += stack.weight
        if stack.thread is None:
            told = False
        else:
            threads.setdefault(key, set()).add(stack.thread)
            every.add(stack.thread)
    if not seen:
        return None
    groups = tuple(
        StackGroup(leaf, kind, library, function, implementation, weight, len(threads.get(key, ())) if told else None)
        for key, weight in sorted(weights.items(), key=lambda item: -item[1])
        for leaf, kind, library, function, implementation in (key,)
    )
    return StackEvidence(unit, total, len(every) if told else None, groups)
