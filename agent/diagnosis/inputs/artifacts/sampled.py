"""Counted stacks -> code facts: on-CPU samples by innermost frame, and who calls sched_yield and futex waits.

The stack formats that count stacks (folded stacks, ``perf script``, bcc's ``stackcount`` and ``profile``, bpftrace
maps) share this: a stack is its frames, innermost first, and its weight (samples, or calls of the traced event).
The call site of a sched_yield or a futex wait is the nearest frame towards the root that is outside the C library
and the kernel and is not the call itself (CPython's ``os_sched_yield`` is the call, as is ``__sched_yield``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agent.diagnosis.facts import CodeShare
from agent.diagnosis.inputs.artifacts import code
from agent.diagnosis.inputs.artifacts.frames import FUTEX, LIBC_FILES, YIELD, Frame

# The kernel's entry code of system calls and faults (6.x dispatches through x64_sys_call)
KERNEL_ENTRY = re.compile(r"^(?:entry_SYSCALL|entry_SYSENTER|entry_INT80|do_syscall_64$|do_syscall_32|x64_sys_call$|"
                          r"el0_svc|el0t_|invoke_syscall|asm_exc_page_fault$|page_fault$|system_call)")  # fmt: skip
PYTHON_YIELD = re.compile(r"^os_sched_yield$")  # CPython's os.sched_yield, whose libc call a profiler may not name


@dataclass(frozen=True)
class Counted:
    """One stack (innermost frame first) and how many samples or calls it stands for."""

    frames: tuple[Frame, ...]
    weight: float


def is_yield(frame: Frame) -> bool:
    """A frame of sched_yield (the C library's wrapper, or CPython's os.sched_yield)."""
    name = frame.function or ""
    return bool(YIELD.search(name) or PYTHON_YIELD.search(name))


def is_futex(frame: Frame) -> bool:
    """A user-space frame that waits in a futex (a mutex, condition variable, semaphore or join)."""
    return bool(FUTEX.search(frame.function or ""))


def mode_of(frame: Frame) -> str:
    """``kernel`` or ``user``."""
    return "kernel" if frame.library == code.KERNEL else "user"


def caller(
    frames: tuple[Frame, ...], at: int, skip: Callable[[Frame], bool] = lambda frame: False
) -> tuple[str, str | None]:
    """(library, function) of the caller of frames[at]: the nearest frame towards the root (a higher index) outside
    the kernel, the C library and the call itself (and not one *skip* accepts); ``(unknown)`` when there is none."""
    for frame in frames[at + 1 :]:
        outside = frame.library != code.KERNEL and not LIBC_FILES.match(frame.library) and not is_yield(frame)
        if outside and not skip(frame):
            return frame.library, frame.function
    return code.UNKNOWN, None


def _rows(counted: dict[tuple[str, str | None], float]) -> tuple[CodeShare, ...] | None:
    ordered = sorted(counted.items(), key=lambda item: -item[1])
    return tuple(CodeShare(library, function, "user", count) for (library, function), count in ordered) or None


def _call_frame(frames: tuple[Frame, ...]) -> int | None:
    """The index of the innermost user-space sched_yield or futex call of a stack, or None."""
    for index, frame in enumerate(frames):
        if frame.library != code.KERNEL and (is_yield(frame) or is_futex(frame)):
            return index
    return None


def _kernel_handler(frames: tuple[Frame, ...]) -> int | None:
    """The index of the kernel function a system call or a page fault entered (``__x64_sys_sched_yield``,
    ``exc_page_fault``): the frame just inside the kernel's entry code, or None."""
    for index, frame in enumerate(frames):
        if frame.library == code.KERNEL and KERNEL_ENTRY.match(frame.function or ""):
            inner = index - 1
            while inner >= 0 and KERNEL_ENTRY.match(frames[inner].function or ""):
                inner -= 1
            return inner if inner >= 0 and frames[inner].library == code.KERNEL else None
    return None


def leaf_samples(stacks: Iterable[Counted]) -> tuple[CodeShare, ...] | None:
    """Each stack's weight on its innermost frame, busiest first; the sched_yield and futex calls and the kernel's
    system-call and page-fault handlers also with the weight of every stack they are in (``inclusive``: the work the
    call entered), as perf report --children counts it."""
    leaves: dict[tuple[str, str | None, str], float] = {}
    calls: dict[tuple[str, str | None, str], float] = {}
    for stack in stacks:
        if not stack.frames:
            continue
        leaf = stack.frames[0]
        key = (leaf.library, leaf.function, mode_of(leaf))
        leaves[key] = leaves.get(key, 0.0) + stack.weight
        for at in {_call_frame(stack.frames), _kernel_handler(stack.frames)} - {None}:
            call = stack.frames[at]  # type: ignore[index]
            called = (call.library, call.function, mode_of(call))
            calls[called] = calls.get(called, 0.0) + stack.weight
    for key in calls:
        leaves.setdefault(key, 0.0)
    ordered = sorted(leaves.items(), key=lambda item: -item[1])
    return (
        tuple(
            CodeShare(library, function, mode, count, inclusive=calls.get((library, function, mode)))
            for (library, function, mode), count in ordered
        )
        or None
    )


def call_sites(stacks: Iterable[Counted]) -> tuple[tuple[CodeShare, ...] | None, tuple[CodeShare, ...] | None]:
    """(yield sites, futex sites): for each stack whose innermost user-space call is sched_yield or a futex wait,
    its weight on that call's caller."""
    yields: dict[tuple[str, str | None], float] = {}
    futexes: dict[tuple[str, str | None], float] = {}
    for stack in stacks:
        if (at := _call_frame(stack.frames)) is not None:
            found = yields if is_yield(stack.frames[at]) else futexes
            site = caller(stack.frames, at)
            found[site] = found.get(site, 0.0) + stack.weight
    return _rows(yields), _rows(futexes)


def sites_of_call(stacks: Iterable[Counted], is_call: Callable[[Frame], bool]) -> tuple[CodeShare, ...] | None:
    """For stacks each of which *is* one call (a traced sched_yield or futex entry): each stack's weight on the
    caller of its innermost user-space frame that *is_call* accepts, or of its innermost user-space frame."""
    counted: dict[tuple[str, str | None], float] = {}
    for stack in stacks:
        user = [index for index, frame in enumerate(stack.frames) if frame.library != code.KERNEL]
        if not user:
            site: tuple[str, str | None] = (code.UNKNOWN, None)
        else:
            at = next((index for index in user if is_call(stack.frames[index])), user[0] - 1)
            site = caller(stack.frames, at)
        counted[site] = counted.get(site, 0.0) + stack.weight
    return _rows(counted)
