"""`schedwatch diagnose`, live: read a source twice, the node's /proc/stat around it, rank the workloads, read the
flagged ones closely, and hand the rules one Facts."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agent.diagnosis.facts import CpuShares, Facts, NodeView, WorkloadView
from agent.diagnosis.inputs.live.budget_inputs import with_budget_inputs
from agent.diagnosis.inputs.live.code_inputs import with_code_inputs
from agent.diagnosis.inputs.live.cpu_states import node_states
from agent.diagnosis.inputs.live.details import read_closely
from agent.diagnosis.inputs.live.ranking import CATCH_ALL, FLAG_SCORE, MAX_FLAGGED, score
from agent.diagnosis.inputs.live.sources import Source
from agent.diagnosis.inputs.live.window import Window, workload_views
from agent.identity.filter import Filter
from agent.identity.members import cgroup_paths, workload_pids
from agent.log import get_logger
from agent.machine.clocksource import ClockSource, read_clocksource
from agent.machine.node_stat import NodeTicks, read_proc_stat
from agent.machine.procfs import ProcFS
from agent.series.reading import Reading

NO_CLOCKSOURCE = ClockSource(None, None)


class NothingMatches(ValueError):
    """The filter names no workload the source knows."""


@dataclass(frozen=True)
class NodeSample:
    """What the node's /proc says at one moment."""

    ticks: NodeTicks
    context_switches: int | None
    procs_running: int | None
    load_average: tuple[float, float, float] | None
    clocksource: ClockSource = NO_CLOCKSOURCE


def read_node_sample(procfs: ProcFS, clock: Callable[[], ClockSource] = read_clocksource) -> NodeSample:
    """/proc/stat, /proc/loadavg and the clock source now."""
    ticks = read_proc_stat(procfs)
    loadavg = (procfs.read_root_text("loadavg") or "").split()
    load: tuple[float, float, float] | None = None
    if len(loadavg) >= 3:
        try:
            load = (float(loadavg[0]), float(loadavg[1]), float(loadavg[2]))
        except ValueError:
            load = None
    return NodeSample(ticks, ticks.context_switches, ticks.procs_running, load, clock())


def node_view(before: NodeSample, after: NodeSample, seconds: float) -> NodeView:
    """The node between two samples."""
    states = node_states(before.ticks, after.ticks, seconds).total
    switches = None
    if before.context_switches is not None and after.context_switches is not None and seconds > 0:
        switches = (after.context_switches - before.context_switches) / seconds
    return NodeView(
        cpus=len(after.ticks.cpus),
        cpu=CpuShares(**vars(states)),  # the same eight states, by the same names
        # procs_running counts the reader itself: one less is what else wanted a CPU.
        run_queue=None if after.procs_running is None else float(max(0, after.procs_running - 1)),
        load_average=after.load_average,
        context_switches_per_second=switches,
        clocksource=after.clocksource.current,
        available_clocksources=after.clocksource.available,
    )


def ranked(views: Sequence[WorkloadView]) -> list[WorkloadView]:
    """Workloads by contention score, highest first (then by name, so that equal scores keep one order)."""
    return sorted(views, key=lambda view: (-score(view), view.ref.name))


def chosen(views: Sequence[WorkloadView], wanted: Filter) -> list[WorkloadView]:
    """The workloads to read closely: those the filter names, or those whose score reaches the bar."""
    candidates = [view for view in views if view.ref.cgroup not in CATCH_ALL]
    if wanted.empty:
        candidates = [view for view in candidates if score(view) >= FLAG_SCORE]
    return ranked(candidates)[:MAX_FLAGGED]


def facts_from_window(
    window: Window,
    wanted: Filter,
    source_name: str,
    local: bool,
    procfs: ProcFS,
    tree: Path | None,
    node: tuple[NodeSample, NodeSample] | None,
    detail_seconds: float,
    node_cpus: int | None = None,
) -> Facts:
    """Facts of the workloads over *window*; the flagged (or asked for) ones read closely when the source is local."""
    if node is not None:
        node_cpus = len(node[1].ticks.cpus)
    views = [
        with_code_inputs(window, with_budget_inputs(window, view))
        for view in workload_views(window, node_cpus)
        if wanted.matches(view.ref)
    ]
    if not wanted.empty and not views:
        raise NothingMatches(
            f"no workload matches {_describe(wanted)} in {source_name} "
            f"({len(window.after.workloads)} workloads seen): check the name with the agent's series"
        )
    notes: list[str] = []
    missing = sorted({"syscalls", "sched", "cgroup_cpu"} - window.after.up)
    if missing:
        notes.append(f"collectors not running: {', '.join(missing)} (their counts are unknown, not zero)")
    closely = chosen(views, wanted)
    if closely and local:
        detailed = _read_closely(procfs, tree, closely, node_cpus, detail_seconds)
        views = [detailed.get(view.ref, view) for view in views]
        if tree is None:
            notes.append("no cgroup tree visible: processes of the workloads could not be listed (pass --cgroup-root)")
    elif closely:
        notes.append(
            "processes, libraries, thread variables and pools were not read: the series are another machine's; "
            "run `schedwatch diagnose` on that node for them"
        )
    node_facts = NodeView(cpus=node_cpus) if node is None else node_view(node[0], node[1], window.seconds)
    return Facts(node=node_facts, workloads=tuple(ranked(views)), sources=(source_name,), notes=tuple(notes))


def _read_closely(
    procfs: ProcFS, tree: Path | None, views: Sequence[WorkloadView], node_cpus: int | None, seconds: float
) -> dict[object, WorkloadView]:
    """Every view read closely at once (their samples overlap in time)."""
    paths = cgroup_paths(tree)
    with ThreadPoolExecutor(max_workers=len(views)) as pool:
        futures = {
            view.ref: pool.submit(read_closely, procfs, view, workload_pids(tree, paths, view.ref), node_cpus, seconds)
            for view in views
        }
        return {ref: future.result() for ref, future in futures.items()}


def _describe(wanted: Filter) -> str:
    parts = [
        f"--{name} {value}"
        for name, value in (
            ("namespace", wanted.namespace),
            ("pod", wanted.pod),
            ("container", wanted.container),
            ("cgroup", wanted.cgroup),
        )
        if value
    ]
    if wanted.pid is not None:
        parts.append(f"--pid {wanted.pid}")
    return " ".join(parts)


def sample_live(
    source: Source,
    seconds: float,
    wanted: Filter,
    procfs: ProcFS,
    tree: Path | None,
    detail_seconds: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Facts:
    """Read *source*, wait *seconds*, read it again, and build the facts."""
    node_before = read_node_sample(procfs) if source.local else None
    before: Reading = source.read()
    logger = get_logger("diagnose")
    logger.info("window_started", seconds=seconds, source=source.name)
    sleep(seconds)
    after: Reading = source.read()
    logger.info("window_ended", workloads=len(after.workloads))
    node_after = read_node_sample(procfs) if source.local else None
    node = (node_before, node_after) if node_before is not None and node_after is not None else None
    return facts_from_window(
        Window(before, after), wanted, source.name, source.local, procfs, tree, node, detail_seconds
    )
