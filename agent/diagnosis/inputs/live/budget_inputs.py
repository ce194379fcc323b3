"""The time budget's live facts of one workload over a window: CPU by mode, system calls by family, waiting for a
CPU by who held it (and which neighbours), blocked time by what it waited on, pressure, processes exited, and its
memory limit, the times it hit it, its page faults and refaults.

Each comes from the series of one collector. A family without a series had no call, as long as the BPF
``syscall_families`` collector ran (it exports families with calls only); without it (perf mode counts a subset of
the families, with --perf-syscall-families) only the families the series name are known. Time by family is known
only while the workload was timed (schedwatch_syscall_timed 1 at both readings). Pressure is known for a workload
with pressure series: a cgroup outside the cgroup2 tree has none, which is unknown, not zero. Waiting by holder and
blocked time come from the BPF sched program only: unknown in perf and procfs modes, and from an agent older than
these series (no workload of the reading has one), though its sched collector runs. Neighbours are known where
waiting by holder is: a workload none held the CPU of has none. Processes exited come from the BPF sched program
(0 without a series while it runs). The memory facts come from the cgroup_memory collector: events it exports only
once they happened (0 until then), faults and refaults where the kernel's files give them, the limit where one
applies.
"""

from __future__ import annotations

from dataclasses import replace

from agent.diagnosis.facts import Workload, WorkloadView
from agent.diagnosis.inputs.live.window import Window
from agent.machine.pressure import RESOURCES
from agent.machine.syscall_families import FAMILIES
from agent.symbols.names import OTHER

FAMILIES_COLLECTOR = "syscall_families"
PRESSURE_COLLECTOR = "pressure"
SCHED_COLLECTOR = "sched"
MEMORY_COLLECTOR = "cgroup_memory"
HOLDERS = ("self", "other", "kernel")
BLOCKED_STATES = ("interruptible", "uninterruptible")
MEMORY_EVENTS = ("high", "max", "oom", "oom_kill")
FAULT_KINDS = ("minor", "major")
NEIGHBOUR_WAIT = "neighbour_wait"


def with_budget_inputs(window: Window, view: WorkloadView) -> WorkloadView:
    """*view* with user/system seconds, calls and seconds by family and pressure totals over *window*."""
    ref = view.ref
    budgeted = replace(
        view,
        user_seconds=window.delta(ref, "cpu_seconds:user"),
        system_seconds=window.delta(ref, "cpu_seconds:system"),
        syscall_calls_by_family=calls_by_family(window, ref),
        syscall_seconds_by_family=seconds_by_family(window, ref),
        pressure_waiting_seconds=grown_split(window, ref, "pressure_waiting", RESOURCES),
        pressure_stalled_seconds=grown_split(window, ref, "pressure_stalled", RESOURCES),
        waiting_by_holder=_sched_split(window, ref, "waiting_by_holder", HOLDERS),
        neighbours=neighbours(window, ref),
        blocked_by_kind=blocked_by_kind(window, ref, view.futex_wait_seconds),
        processes_exited=window.delta(ref, "processes_exited"),
    )
    return with_memory_facts(window, budgeted)


def neighbours(window: Window, ref: Workload) -> tuple[tuple[str, float], ...] | None:
    """The other workloads that held a CPU this one waited for, and for how long in the window, longest first;
    None where waiting by holder is unknown. A neighbour whose series the earlier reading lacks (it joined the
    exported few in the window) or that went backwards (named again after it left them) is unknown for the window
    and left out, never counted whole: its wait stays in the workload's wait for others, so the others' shares are
    smaller. The (other) row is not a workload."""
    holders = _sched_split(window, ref, "waiting_by_holder", HOLDERS)
    if holders is None:
        return None
    after = window.after.workloads.get(ref)
    prefix = f"{NEIGHBOUR_WAIT}:"
    held: dict[str, float] = {}
    for key in after.counts if after is not None else {}:
        name = key[len(prefix) :]
        if not key.startswith(prefix) or name == OTHER:
            continue
        grown = window.delta(ref, key)  # None: absent from the earlier reading of a workload it had, or restarted
        if grown is not None and grown > 0:
            # The pair map is read a moment after the holder split: a neighbour may show a few microseconds more.
            held[name] = min(grown, holders["other"])
    return tuple(sorted(held.items(), key=lambda item: (-item[1], item[0])))


def with_memory_facts(window: Window, view: WorkloadView) -> WorkloadView:
    """*view* with its memory events, page faults (all, major), refaults and limit over the window; None each where
    unknown."""
    if MEMORY_COLLECTOR not in window.after.up:
        return view
    ref = view.ref
    faults = grown_split(window, ref, "page_faults", FAULT_KINDS)
    after = window.after.workloads.get(ref)
    # A workload the collector read has its page faults; only then are its events' missing series zeros.
    events = None if faults is None else grown_split(window, ref, "memory_events", MEMORY_EVENTS, every=True)
    return replace(
        view,
        memory_events=events,
        page_faults=None if faults is None else sum(faults.values()),
        major_page_faults=None if faults is None else faults.get("major"),
        memory_refaults=_grown(window, ref, "memory_refaults"),
        memory_limit_bytes=None if after is None else after.gauges.get("memory_limit_bytes"),
    )


def _grown(window: Window, ref: Workload, key: str) -> float | None:
    """How much a count with no zero-when-absent rule grew: None without a series in the second reading."""
    after = window.after.workloads.get(ref)
    return None if after is None or key not in after.counts else window.delta(ref, key)


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
