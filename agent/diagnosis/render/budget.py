"""Where a workload's thread-seconds went over the window, as the reports print it: running (user, kernel, and the
system calls by family), waiting for a CPU (by who held it, and throttled), blocked (by what it waited on), and
the kernel's pressure totals. Each line says only what the facts know; a part with no fact at all is left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.diagnosis.facts import WorkloadView
from agent.diagnosis.render.numbers import number

FAMILIES_SHOWN = 4  # system-call families named per line, busiest first
HOLDER_NAMES = {"self": "its own threads", "other": "other workloads", "kernel": "the kernel"}
BLOCKED_NAMES = {"futex": "futex waits", "io": "uninterruptible (I/O, vfork)", "sleep": "other sleeps"}


def seconds(value: float) -> str:
    """Seconds as the budget prints them."""
    return f"{number(value)} s"


def _split(parts: Mapping[str, float], names: Mapping[str, str] | None = None, unit: bool = True) -> str:
    ranked = sorted(parts.items(), key=lambda item: item[1], reverse=True)
    shown = [f"{(names or {}).get(name, name)} {seconds(value) if unit else number(value)}" for name, value in ranked]
    return ", ".join(shown)


def _busiest(parts: Mapping[str, float], unit: bool) -> str:
    ranked = [(name, value) for name, value in sorted(parts.items(), key=lambda item: item[1], reverse=True) if value]
    shown = _split(dict(ranked[:FAMILIES_SHOWN]), unit=unit)
    rest = len(ranked) - FAMILIES_SHOWN
    return shown + (f" (+{rest} more)" if rest > 0 else "") if shown else "none"


def running(workload: WorkloadView) -> str | None:
    """CPU time by mode."""
    user, system = workload.user_seconds, workload.system_seconds
    if user is None and system is None:
        return None
    known = [f"user {seconds(user)}" if user is not None else "user ?"]
    known.append(f"in the kernel {seconds(system)}" if system is not None else "in the kernel ?")
    total = f" {seconds(user + system)}" if user is not None and system is not None else ""
    return f"running{total}: " + ", ".join(known)


def waiting(workload: WorkloadView) -> str | None:
    """The wait for a CPU, by holder where known, and time throttled by the quota."""
    waited, holders = workload.runqueue_wait_seconds, workload.waiting_by_holder
    if waited is None and holders is None and workload.throttled_seconds is None:
        return None
    line = "waiting for a CPU" + (f" {seconds(waited)}" if waited is not None else "")
    parts = []
    if holders:
        parts.append(f"held by {_split(holders, HOLDER_NAMES)}")
    if workload.throttled_seconds is not None:
        parts.append(f"throttled by its CPU quota {seconds(workload.throttled_seconds)}")
    return line + (": " + "; ".join(parts) if parts else "")


def blocked(workload: WorkloadView) -> str | None:
    """Time asleep by what it waited on."""
    kinds = workload.blocked_by_kind
    if kinds is None:
        return (
            None
            if workload.futex_wait_seconds is None
            else f"blocked: futex waits {seconds(workload.futex_wait_seconds)}"
        )
    return f"blocked {seconds(sum(kinds.values()))}: {_split(kinds, BLOCKED_NAMES)}"


def pressure(workload: WorkloadView) -> str | None:
    """PSI "some" (and "full") seconds per resource, where the kernel has them."""
    some, full = workload.pressure_waiting_seconds, workload.pressure_stalled_seconds
    if some is None:
        return None
    shown = []
    for resource, value in some.items():
        stalled = (full or {}).get(resource)
        shown.append(f"{resource} {seconds(value)}" + (f" (all at once {seconds(stalled)})" if stalled else ""))
    return "pressure (PSI, some of its tasks stalled): " + ", ".join(shown)


def accounted(workload: WorkloadView) -> str | None:
    """Running + waiting + blocked, when every part is known."""
    parts = (
        workload.user_seconds,
        workload.system_seconds,
        workload.runqueue_wait_seconds,
        None if workload.blocked_by_kind is None else sum(workload.blocked_by_kind.values()),
    )
    if any(part is None for part in parts):
        return None
    total = sum(part for part in parts if part is not None)
    line = f"accounted {seconds(total)} (running + waiting + blocked)"
    if workload.seconds:
        line += f": {number(total / workload.seconds)} threads on average over {seconds(workload.seconds)}"
    return line


def budget_lines(workload: WorkloadView) -> tuple[str, ...]:
    """Every part of the budget the facts know, one line each, top-down; () when the facts hold no more than the
    counts a report's summary line already shows."""
    calls, inside = workload.syscall_calls_by_family, workload.syscall_seconds_by_family
    lines = (
        running(workload),
        None if calls is None else "system calls by family: " + _busiest(calls, unit=False),
        None if inside is None else "time inside them (entry to return, sleeping included): " + _busiest(inside, True),
        waiting(workload),
        blocked(workload),
        pressure(workload),
        accounted(workload),
    )
    budget_only = (lines[0], lines[1], lines[2], lines[5], workload.waiting_by_holder, workload.blocked_by_kind)
    if all(part is None for part in budget_only):
        return ()
    return tuple(line for line in lines if line is not None)
