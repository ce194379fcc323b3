"""The time budget's live facts of one workload over a window: CPU by mode, system calls by family, waiting for a
CPU by who held it (and which neighbours), blocked time by what it waited on, pressure, processes exited, and its
memory limit, the times it hit it, its page faults and refaults.

Each comes from the series of one collector. A family without a series had no call, as long as the BPF
``syscall_families`` collector ran (it exports families with calls only); without it (perf mode counts a subset of
the families, with --perf-syscall-families) only the families the series name are known. Time by family is known
only while the workload was timed (its metrics.SYSCALL_TIMED 1 at both readings). Pressure is known for a workload
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

from agent import metrics
from agent.diagnosis.facts import Workload, WorkloadView
from agent.diagnosis.inputs.live.window import Window
from agent.machine.pressure import RESOURCES
from agent.machine.syscall_families import FAMILIES
from agent.metrics import MetricSpec
from agent.symbols.names import OTHER
from agent.tables import families, files, sched

FAMILIES_COLLECTOR = families.TABLE.collector
SCHED_COLLECTOR = sched.TABLE.collector
MEMORY_COLLECTOR = files.CGROUP_MEMORY.collector
HOLDERS = ("self", "other", "kernel")
BLOCKED_STATES = ("interruptible", "uninterruptible")
MEMORY_EVENTS = ("high", "max", "oom", "oom_kill")
FAULT_KINDS = ("minor", "major")


def with_budget_inputs(window: Window, view: WorkloadView) -> WorkloadView:
    """*view* with user/system seconds, calls and seconds by family and pressure totals over *window*."""
    ref = view.ref
    budgeted = replace(
        view,
        user_seconds=window.delta(ref, metrics.CPU_USAGE_SECONDS, "user"),
        system_seconds=window.delta(ref, metrics.CPU_USAGE_SECONDS, "system"),
        syscall_calls_by_family=calls_by_family(window, ref),
        syscall_seconds_by_family=seconds_by_family(window, ref),
        pressure_waiting_seconds=grown_split(window, ref, metrics.PRESSURE_WAITING_SECONDS, RESOURCES),
        pressure_stalled_seconds=grown_split(window, ref, metrics.PRESSURE_STALLED_SECONDS, RESOURCES),
        waiting_by_holder=_sched_split(window, ref, metrics.RUNQUEUE_WAIT_BY_HOLDER_SECONDS, HOLDERS),
        neighbours=neighbours(window, ref),
        blocked_by_kind=blocked_by_kind(window, ref, view.futex_wait_seconds),
        processes_exited=window.delta(ref, metrics.PROCESSES_EXITED),
    )
    return with_memory_facts(window, budgeted)


def neighbours(window: Window, ref: Workload) -> tuple[tuple[str, float], ...] | None:
    """The other workloads that held a CPU this one waited for, and for how long in the window, longest first;
    None where waiting by holder is unknown. A neighbour whose series the earlier reading lacks (it joined the
    exported few in the window) or that went backwards (named again after it left them) is unknown for the window
    and left out, never counted whole: its wait stays in the workload's wait for others, so the others' shares are
    smaller. The (other) row is not a workload."""
    holders = _sched_split(window, ref, metrics.RUNQUEUE_WAIT_BY_HOLDER_SECONDS, HOLDERS)
    if holders is None:
        return None
    after = window.after.workloads.get(ref)
    held: dict[str, float] = {}
    for name in after.parts(metrics.RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS) if after is not None else {}:
        if name == OTHER:
            continue
        # None: absent from the earlier reading of a workload it had, or restarted
        grown = window.delta(ref, metrics.RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS, name)
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
    faults = grown_split(window, ref, metrics.PAGE_FAULTS, FAULT_KINDS)
    after = window.after.workloads.get(ref)
    # A workload the collector read has its page faults; only then are its events' missing series zeros.
    events = None if faults is None else grown_split(window, ref, metrics.MEMORY_EVENTS, MEMORY_EVENTS, every=True)
    return replace(
        view,
        memory_events=events,
        page_faults=None if faults is None else sum(faults.values()),
        major_page_faults=None if faults is None else faults.get("major"),
        memory_refaults=_grown(window, ref, metrics.MEMORY_REFAULTS),
        memory_limit_bytes=None if after is None else after.gauge(metrics.MEMORY_LIMIT_BYTES),
    )


def _grown(window: Window, ref: Workload, spec: MetricSpec) -> float | None:
    """How much a count with no zero-when-absent rule grew: None without a series in the second reading."""
    after = window.after.workloads.get(ref)
    return None if after is None or after.count(spec) is None else window.delta(ref, spec)


def blocked_by_kind(window: Window, ref: Workload, futex_wait_seconds: float | None) -> dict[str, float] | None:
    """Blocked seconds by what the threads waited on: ``io`` (uninterruptible sleep), ``futex`` (the futex waits'
    own count) and ``sleep`` (the rest of the interruptible sleep, never below 0: a futex wait's seconds also hold
    the wait for a CPU after its wake-up, which blocked time does not). Without a futex count, no futex key."""
    states = _sched_split(window, ref, metrics.BLOCKED_SECONDS, BLOCKED_STATES)
    if states is None:
        return None
    kinds = {"io": states["uninterruptible"]}
    if futex_wait_seconds is None:
        kinds["sleep"] = states["interruptible"]
    else:
        kinds["futex"] = futex_wait_seconds
        kinds["sleep"] = max(0.0, states["interruptible"] - futex_wait_seconds)
    return kinds


def _sched_split(window: Window, ref: Workload, spec: MetricSpec, names: tuple[str, ...]) -> dict[str, float] | None:
    """A split count of the BPF sched program; None where the agent does not export it (see the module's text)."""
    if SCHED_COLLECTOR not in window.after.up or not window.after.knows(spec) or not window.after.has(spec):
        return None
    return grown_split(window, ref, spec, names, every=True)


def calls_by_family(window: Window, ref: Workload) -> dict[str, float] | None:
    """System calls per family over the window; None when no collector counted them."""
    if FAMILIES_COLLECTOR in window.after.up:
        return grown_split(window, ref, metrics.SYSCALLS, FAMILIES, every=True)
    return grown_split(window, ref, metrics.SYSCALLS, FAMILIES)


def seconds_by_family(window: Window, ref: Workload) -> dict[str, float] | None:
    """Seconds inside the system calls per family; None unless the workload was timed through the window."""
    if FAMILIES_COLLECTOR not in window.after.up or not _timed(window, ref):
        return None
    return grown_split(window, ref, metrics.SYSCALL_SECONDS, FAMILIES, every=True)


def _timed(window: Window, ref: Workload) -> bool:
    after = window.after.workloads.get(ref)
    if after is None or after.gauge(metrics.SYSCALL_TIMED) != 1:
        return False
    before = window.before.workloads.get(window.earlier_ref(ref))
    # a workload new in the window counts from 0
    return before is None or before.gauge(metrics.SYSCALL_TIMED) == 1


def grown_split(
    window: Window, ref: Workload, spec: MetricSpec, names: tuple[str, ...], every: bool = False
) -> dict[str, float] | None:
    """How much each part *name* of a split counter grew over the window.

    *every*: a name without a series counts 0 (its collector exports only what happened); otherwise only the names
    with a series in the second reading are known, and None when there is none. None too when a counter went
    backwards (the agent restarted) or had no number.
    """
    after = window.after.workloads.get(ref)
    before = window.before.workloads.get(window.earlier_ref(ref))
    after_counts = after.parts(spec) if after is not None else {}
    before_counts = before.parts(spec) if before is not None else {}
    present = [name for name in names if name in after_counts]
    if not every and not present:
        return None
    grown: dict[str, float] = {}
    for name in names if every else present:
        if window.after.lacks_value(ref, spec, name) or window.before.lacks_value(window.earlier_ref(ref), spec, name):
            return None
        value = after_counts.get(name, 0.0) - before_counts.get(name, 0.0)
        if value < 0:
            return None
        grown[name] = value
    return grown
