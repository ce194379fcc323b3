"""The time budget's live facts of one workload over a window: CPU by mode, system calls by family, waiting for a
CPU by who held it, blocked time by what it waited on, pressure.

Each comes from the series of one collector. A family without a series had no call, as long as the BPF
``syscall_families`` collector ran (it exports families with calls only); without it (perf mode counts a subset of
the families, with --perf-syscall-families) only the families the series name are known. Time by family is known
only while the workload was timed (schedwatch_syscall_timed 1 at both readings). Pressure is known for a workload
with pressure series: a cgroup outside the cgroup2 tree has none, which is unknown, not zero. Waiting by holder and
blocked time come from the BPF sched program only: unknown in perf and procfs modes, and from an agent older than
these series (no workload of the reading has one), though its sched collector runs.
"""

from __future__ import annotations

from dataclasses import replace

from agent.diagnosis.facts import Workload, WorkloadView
from agent.diagnosis.inputs.live.window import Window
from agent.machine.pressure import RESOURCES
from agent.machine.syscall_families import FAMILIES

FAMILIES_COLLECTOR = "syscall_families"
PRESSURE_COLLECTOR = "pressure"
SCHED_COLLECTOR = "sched"
HOLDERS = ("self", "other", "kernel")
BLOCKED_STATES = ("interruptible", "uninterruptible")


def with_budget_inputs(window: Window, view: WorkloadView) -> WorkloadView:
    """*view* with user/system seconds, calls and seconds by family and pressure totals over *window*."""
    ref = view.ref
    return replace(
        view,
        user_seconds=window.delta(ref, "cpu_seconds:user"),
        system_seconds=window.delta(ref, "cpu_seconds:system"),
        syscall_calls_by_family=calls_by_family(window, ref),
        syscall_seconds_by_family=seconds_by_family(window, ref),
        pressure_waiting_seconds=grown_split(window, ref, "pressure_waiting", RESOURCES),
        pressure_stalled_seconds=grown_split(window, ref, "pressure_stalled", RESOURCES),
        waiting_by_holder=_sched_split(window, ref, "waiting_by_holder", HOLDERS),
        blocked_by_kind=blocked_by_kind(window, ref, view.futex_wait_seconds),
    )


def blocked_by_kind(window: Window, ref: Workload, futex_wait_seconds: float | None) -> dict[str, float] | None:
    """Blocked seconds by what the threads waited on: ``io`` (uninterruptible sleep), ``futex`` (the futex waits'
    own count) and ``sleep`` (the rest of the interruptible sleep, never below 0: a futex wait's seconds also hold
    the wait for a CPU after its wake-up, which blocked time does not). Without a futex count, no futex key."""
    states = _sched_split(window, ref, "blocked", BLOCKED_STATES)
    if states is None:
        return None
    kinds = {"io": states["uninterruptible"]}
    if futex_wait_seconds is None:
        kinds["sleep"] = states["interruptible"]
    else:
        kinds["futex"] = futex_wait_seconds
        kinds["sleep"] = max(0.0, states["interruptible"] - futex_wait_seconds)
    return kinds


def _sched_split(window: Window, ref: Workload, key: str, names: tuple[str, ...]) -> dict[str, float] | None:
    """A split count of the BPF sched program; None where the agent does not export it (see the module's text)."""
    if SCHED_COLLECTOR not in window.after.up or key in window.after.unknown:
        return None
    if key not in window.after.kinds:
        return None
    return grown_split(window, ref, key, names, every=True)


def calls_by_family(window: Window, ref: Workload) -> dict[str, float] | None:
    """System calls per family over the window; None when no collector counted them."""
    if FAMILIES_COLLECTOR in window.after.up:
        return grown_split(window, ref, "syscall_calls", FAMILIES, every=True)
    return grown_split(window, ref, "syscall_calls", FAMILIES)


def seconds_by_family(window: Window, ref: Workload) -> dict[str, float] | None:
    """Seconds inside the system calls per family; None unless the workload was timed through the window."""
    if FAMILIES_COLLECTOR not in window.after.up or not _timed(window, ref):
        return None
    return grown_split(window, ref, "syscall_seconds", FAMILIES, every=True)


def _timed(window: Window, ref: Workload) -> bool:
    after = window.after.workloads.get(ref)
    if after is None or after.gauges.get("syscall_timed") != 1:
        return False
    before = window.before.workloads.get(window.earlier_ref(ref))
    return before is None or before.gauges.get("syscall_timed") == 1  # a workload new in the window counts from 0


def grown_split(
    window: Window, ref: Workload, key: str, names: tuple[str, ...], every: bool = False
) -> dict[str, float] | None:
    """How much each ``key:name`` counter grew over the window.

    *every*: a name without a series counts 0 (its collector exports only what happened); otherwise only the names
    with a series in the second reading are known, and None when there is none. None too when a counter went
    backwards (the agent restarted) or had no number.
    """
    after = window.after.workloads.get(ref)
    before = window.before.workloads.get(window.earlier_ref(ref))
    after_counts = after.counts if after is not None else {}
    before_counts = before.counts if before is not None else {}
    present = [name for name in names if f"{key}:{name}" in after_counts]
    if not every and not present:
        return None
    grown: dict[str, float] = {}
    for name in names if every else present:
        full = f"{key}:{name}"
        if (after is not None and full in after.no_value) or (before is not None and full in before.no_value):
            return None
        value = after_counts.get(full, 0.0) - before_counts.get(full, 0.0)
        if value < 0:
            return None
        grown[name] = value
    return grown
