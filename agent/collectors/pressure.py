"""The pressure collector: the kernel's own stall accounting (PSI) per workload and for the node, in every mode.

Per workload, each cgroup2 directory's ``cpu.pressure``, ``memory.pressure`` and ``io.pressure``; for the node,
``/proc/pressure/*``. No BPF, no perf: it runs wherever the kernel has PSI, including hosts where no probe can. A
kernel without PSI gets no series at all (never zeros), and `check` says why.

Totals include a cgroup's descendants, so of one workload's cgroups only the outermost are read (as for CPU used);
a cgroup that never stalled (every total 0) is not exported, which keeps empty cgroups out of the series. The
files are read through descriptors held open, at a scrape when the cgroup's cpu.stat moved since they were last read
(agent/machine/cgroups/activity.py), and at least every 60-120 s: a cgroup that ran nothing in between serves its
last totals. What that gate delays: a stall that grows while no thread of the cgroup runs at all (every thread
blocked on I/O or memory the whole time) shows up to two minutes late, never lost (docs/benchmarks.md: it saved
about 40 ms a scrape at 1,000 idle workloads).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.core import Metric

from agent import metrics
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.exposition.family import BlockCache
from agent.identity.workload import workload_for_cgroup
from agent.machine.cgroups.activity import ActivityGate
from agent.machine.cgroups.files import outermost
from agent.machine.facts import MachineFacts
from agent.machine.held_files import HeldFiles
from agent.machine.pressure import PROC_PRESSURE, RESOURCES, node_pressure_available, parse_pressure
from agent.model import CounterTable, Labels

NAME = "pressure"
FILES_PER_CGROUP = len(RESOURCES) + 1  # and cpu.stat, which tells whether the cgroup ran
NO_FULL = -1  # a `full` total the kernel does not give (the node's CPU before Linux 5.13)


def check(facts: MachineFacts) -> Availability:
    """Needs PSI in the kernel; per workload, a cgroup2 tree too (the node's totals need only /proc/pressure)."""
    if not node_pressure_available():
        return Availability(
            False,
            "the kernel accounts no pressure (/proc/pressure/cpu is missing: built without CONFIG_PSI, or psi=0)",
            "boot with psi=1 on the kernel command line (kernels built with CONFIG_PSI_DEFAULT_DISABLED)",
        )
    return Availability(True)


class PressureCollector:
    """Reads every outermost cgroup2 directory's pressure files, and the node's, once per scrape."""

    name = NAME

    def __init__(self, context: CollectorContext, node_root: Path = PROC_PRESSURE) -> None:
        self._root = context.facts.cgroup_root
        self._resolver = context.resolver
        self._identities = context.identities
        self._node_root = node_root
        self._max_cgroups = context.settings.max_cgroups
        width = 2 * len(RESOURCES)
        self._table = CounterTable(width=width, grace_seconds=context.settings.series_grace_seconds)
        roots = [str(self._root)] if self._root is not None else []
        self._files = HeldFiles(FILES_PER_CGROUP * context.settings.max_cgroups, roots)
        self._stalled: set[int] = set()  # cgroups seen with a stall: exported from then on
        read_stat = context.cpu_stats.read if context.cpu_stats is not None else self._files.read
        self._gate = ActivityGate(self._root, read_stat) if self._root is not None else None
        self._last: dict[int, list[int] | None] = {}  # each cgroup's totals when its files were last read
        self._blocks = BlockCache(_workload_rows)

    def collect(self) -> list[Metric]:
        """Read the pressure files and build the families."""
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        if self._root is not None:
            paths = self._resolver.snapshot(this_round=True)
            by_labels: dict[Labels, list[tuple[str, int]]] = {}
            for cgroup_id, path in paths.items():
                if path == "/":
                    continue  # the root's totals are the node's
                labels = workload_for_cgroup(path, self._identities).labels()
                by_labels.setdefault(labels, []).append((path, cgroup_id))
            for workload, cgroups in by_labels.items():
                for path, cgroup_id in outermost(cgroups):
                    totals = self._read_unless_idle(path, cgroup_id)
                    if totals is not None:
                        live[cgroup_id] = (workload, totals)
            self._stalled &= set(paths)
            self._last = {key: value for key, value in self._last.items() if key in paths}
            if self._gate is not None:
                self._gate.keep_only(set(paths))
            self._files.end_round()
        self._table.update(live)
        return self._families()

    def close(self) -> None:
        """Close the files held open."""
        self._files.close()

    def _read_unless_idle(self, path: str, cgroup_id: int) -> list[int] | None:
        """The cgroup's totals as last read while it ran nothing since (within the gate's refresh), else read now."""
        if self._gate is not None and self._gate.idle(cgroup_id, path) and cgroup_id in self._last:
            return self._last[cgroup_id]
        totals = self._last[cgroup_id] = self._read(path, cgroup_id)
        return totals

    def _read(self, path: str, cgroup_id: int) -> list[int] | None:
        """Some and full totals (microseconds) of each resource; None for a cgroup not to export (yet)."""
        totals: list[int] = []
        for resource in RESOURCES:
            text = self._files.read(f"{self._root}{path}/{resource}.pressure")
            pressure = None if text is None else parse_pressure(text)
            if pressure is None:
                return None  # gone, or not a cgroup2 directory with PSI files
            totals += [pressure.some_us, NO_FULL if pressure.full_us is None else pressure.full_us]
        if cgroup_id not in self._stalled:
            if not any(total > 0 for total in totals) or len(self._stalled) >= self._max_cgroups:
                return None
            self._stalled.add(cgroup_id)
        return totals

    def _families(self) -> list[Metric]:
        waiting = metrics.PRESSURE_WAITING_SECONDS.family()
        stalled = metrics.PRESSURE_STALLED_SECONDS.family()
        self._blocks.add_to([waiting, stalled], self._table.rows())
        node_waiting = metrics.NODE_PRESSURE_WAITING_SECONDS.family()
        node_stalled = metrics.NODE_PRESSURE_STALLED_SECONDS.family()
        for resource in RESOURCES:
            try:
                pressure = parse_pressure((self._node_root / resource).read_text())
            except OSError:
                continue
            if pressure is None:
                continue
            node_waiting.add_metric([resource], pressure.some_us / 1e6)
            if pressure.full_us is not None:
                node_stalled.add_metric([resource], pressure.full_us / 1e6)
        tracked = metrics.TRACKED_SERIES.family()
        tracked.add_metric([NAME], len(self._stalled))
        return [waiting, stalled, node_waiting, node_stalled, tracked]


def _workload_rows(labels: Labels, totals: tuple[int, ...]) -> tuple[list[Any], list[Any]]:
    """A workload's rows of the waiting and stalled families (a block made once while its totals stand: the writer
    and the standing evaluation reuse it)."""
    waiting, stalled = [], []
    for index, resource in enumerate(RESOURCES):
        some, full = totals[2 * index], totals[2 * index + 1]
        waiting.append(((*labels, resource), some / 1e6))
        if full >= 0:
            stalled.append(((*labels, resource), full / 1e6))
    return waiting, stalled


FACTORY = CollectorFactory(
    NAME,
    "CPU, memory and I/O pressure (PSI) per workload and for the node (cgroup2 *.pressure, /proc/pressure)",
    check,
    PressureCollector,
)
