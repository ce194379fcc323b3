"""What a dump of threads taken at one moment tells (gdb or eu-stack backtraces, ``py-spy dump``): which code the
running threads were in, and how many threads were in each state. One moment is not a profile: a running thread
counts one sample."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from agent.diagnosis.facts import CodeShare
from agent.diagnosis.inputs.artifacts.frames import Frame


class Thread(Protocol):
    """A thread of a dump: its stack (innermost frame first) and its state ("running", "futex", "yield", ...)."""

    @property
    def frames(self) -> tuple[Frame, ...]: ...

    @property
    def state(self) -> str: ...


T = TypeVar("T", bound=Thread)


def running_code(threads: Sequence[Thread]) -> tuple[tuple[CodeShare, ...] | None, float | None]:
    """The running threads' innermost code, busiest first, and how many threads it counts; (None, None) when no
    thread ran."""
    running: dict[tuple[str, str | None], float] = {}
    for thread in threads:
        if thread.state == "running" and thread.frames:
            top = thread.frames[0]
            running[(top.library, top.function)] = running.get((top.library, top.function), 0.0) + 1
    return _ranked(running), float(sum(running.values())) if running else None


def states_told(threads: Sequence[Thread]) -> str:
    """How many threads were in each state, by state name: ``1 futex, 3 running``."""
    states = Counter(thread.state for thread in threads)
    return ", ".join(f"{count} {state}" for state, count in sorted(states.items()))


def callers(
    threads: Sequence[T], state: str, caller: Callable[[T], tuple[str, str | None]]
) -> tuple[CodeShare, ...] | None:
    """The *caller* (library, function) of each thread in *state*, one count a thread, most first; None for none."""
    counted: dict[tuple[str, str | None], float] = {}
    for thread in threads:
        if thread.state == state:
            site = caller(thread)
            counted[site] = counted.get(site, 0.0) + 1
    return _ranked(counted)


def _ranked(counted: dict[tuple[str, str | None], float]) -> tuple[CodeShare, ...] | None:
    ordered = sorted(counted.items(), key=lambda item: -item[1])
    return tuple(CodeShare(library, function, "user", count) for (library, function), count in ordered) or None
