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
from agent.diagnosis.inputs.artifacts.backtrace import FUTEX, LIBC_FILES, YIELD, Frame

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


def caller(frames: tuple[Frame, ...], at: int) -> tuple[str, str | None]:
    """(library, function) of the caller of frames[at]: the nearest frame towards the root (a higher index) outside
    the kernel, the C library and the call itself; ``(unknown)`` when the stack shows none."""
    for frame in frames[at + 1 :]:
        if frame.library != code.KERNEL and not LIBC_FILES.match(frame.library) and not is_yield(frame):
            return frame.library, frame.function
    return code.UNKNOWN, None


def _rows(counted: dict[tuple[str, str | None], float]) -> tuple[CodeShare, ...] | None:
    ordered = sorted(counted.items(), key=lambda item: -item[1])
    return tuple(CodeShare(library, function, "user", count) for (library, function), count in ordered) or None


def leaf_samples(stacks: Iterable[Counted]) -> tuple[CodeShare, ...] | None:
    """Each stack's weight on its innermost frame, busiest first."""
    leaves: dict[tuple[str, str | None, str], float] = {}
    for stack in stacks:
        if stack.frames:
            leaf = stack.frames[0]
            key = (leaf.library, leaf.function, mode_of(leaf))
            leaves[key] = leaves.get(key, 0.0) + stack.weight
    ordered = sorted(leaves.items(), key=lambda item: -item[1])
    return tuple(CodeShare(library, function, mode, count) for (library, function, mode), count in ordered) or None


def call_sites(stacks: Iterable[Counted]) -> tuple[tuple[CodeShare, ...] | None, tuple[CodeShare, ...] | None]:
    """(yield sites, futex sites): for each stack whose innermost user-space call is sched_yield or a futex wait,
    its weight on that call's caller."""
    yields: dict[tuple[str, str | None], float] = {}
    futexes: dict[tuple[str, str | None], float] = {}
    for stack in stacks:
        for index, frame in enumerate(stack.frames):
            if frame.library == code.KERNEL:
                continue
            found = yields if is_yield(frame) else futexes if is_futex(frame) else None
            if found is not None:
                site = caller(stack.frames, index)
                found[site] = found.get(site, 0.0) + stack.weight
                break
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
