"""Findings as a metric: the agent runs the rules on its own series, counts only, and exports metrics.FINDING
(``{cause, mechanism, <workload labels>} 1``) for each finding until an evaluation no longer makes it.

A scrape at least EVALUATE_SECONDS after the previous one that did hands the families it served over once its text
is written; the agent's main loop judges them between scrapes (evaluate_pending), off the scrapes' path, over the
time since the previous evaluation, and the scrapes after serve what it found. Only workloads whose contention score
reaches the flag bar are judged: no other can reach a rule's threshold. Series are bounded by MAX_SERIES. The node's
CPU states (steal among them) come from /proc/stat and its clock source from sysfs, both read at each evaluation
when the agent gives them (the kernel's watchdog can switch the clock source while the agent runs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from prometheus_client.core import Metric

from agent import metrics
from agent.diagnosis.facts import CpuShares, Facts, NodeView, Workload
from agent.diagnosis.inputs.live.budget_inputs import with_budget_inputs
from agent.diagnosis.inputs.live.cpu_states import percentages
from agent.diagnosis.inputs.live.ranking import CATCH_ALL, FLAG_SCORE, score
from agent.diagnosis.inputs.live.window import Window, changed_workloads, workload_view
from agent.diagnosis.rules import diagnose
from agent.machine.clocksource import ClockSource
from agent.machine.node_stat import CpuTicks, read_proc_stat
from agent.machine.procfs import ProcFS
from agent.model import Labels
from agent.series.reading import FamiliesReader, NotSchedwatch, Reading

EVALUATE_SECONDS = 10.0  # shortest window judged: shorter ones make noisy rates
MAX_SERIES = 1000  # findings exported at most (a node of 1,000 sick workloads has other problems first)

Row = tuple[str, ...]  # cause, mechanism, then the workload labels


def node_ticks(procfs: ProcFS) -> Callable[[], CpuTicks | None]:
    """A reader of the node's CPU ticks by state (None when /proc/stat cannot be read)."""

    def read() -> CpuTicks | None:
        try:
            return read_proc_stat(procfs).total
        except (OSError, ValueError):
            return None

    return read


class StandingFindings:
    """The findings of the last evaluation; scrapes hand their families over at most every EVALUATE_SECONDS."""

    def __init__(
        self,
        node_cpus: int,
        clock: Callable[[], float] = time.monotonic,
        every: float = EVALUATE_SECONDS,
        count_workers: Callable[[list[Workload]], dict[Workload, int]] | None = None,
        node_ticks: Callable[[], CpuTicks | None] | None = None,
        clocksource: Callable[[], ClockSource] | None = None,
    ) -> None:
        """*node_ticks*: the node's CPU ticks by state now (/proc/stat's total line); None: its states are unknown.
        *clocksource*: reads the node's clock source now; None: unknown."""
        self._node = NodeView(cpus=node_cpus)
        self._clocksource = clocksource
        self._node_ticks = node_ticks
        self._last_ticks: CpuTicks | None = None
        self._count_workers = count_workers
        self._workers: dict[Workload, int] = {}
        self._clock = clock
        self._every = every
        self._handed_at: float | None = None
        self._pending: tuple[list[Metric], float] | None = None
        self._pending_lock = threading.Lock()
        self._reader = FamiliesReader()
        self._last: Reading | None = None
        self._rows: list[Row] = []

    def family(self, live: set[Labels] | None = None) -> Metric:
        """The finding family for this scrape: the last evaluation's findings, of the workloads in *live* (their
        label values) where it is given: a workload gone since the evaluation takes its findings with it."""
        family = metrics.FINDING.family()
        for row in self._rows:
            if live is None or row[2:] in live:
                family.add_metric(list(row), 1)
        return family

    def pool_workers_family(self, live: set[Labels] | None = None) -> Metric:
        """The pool workers of the workloads the last evaluation flagged (none without a counter), of those in
        *live* where it is given."""
        family = metrics.POOL_WORKERS.family()
        for ref, workers in sorted(self._workers.items(), key=lambda item: item[0].cgroup)[:MAX_SERIES]:
            if live is None or ref.labels() in live:
                family.add_metric(list(ref.labels()), workers)
        return family

    def node_cpus_family(self) -> Metric:
        """The node's CPUs the rules count with."""
        family = metrics.NODE_CPUS.family()
        if self._node.cpus is not None:
            family.add_metric([], self._node.cpus)
        return family

    def hand_over(self, families: Iterable[Metric]) -> None:
        """Keep the families a scrape served (build info included) for evaluate_pending, when an evaluation is due."""
        now = self._clock()
        if self._handed_at is None or now - self._handed_at >= self._every:
            with self._pending_lock:
                self._pending = (list(families), now)
            self._handed_at = now

    def evaluate_pending(self) -> None:
        """Judge the families a scrape handed over, if any (the agent's main loop calls this between scrapes)."""
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            reading = self._reader.read(*pending)
        except NotSchedwatch:  # families without the build info: nothing to judge
            return
        ticks = None if self._node_ticks is None else self._node_ticks()
        if self._last is not None:
            self._rows = self._evaluate(Window(self._last, reading), self._node_between(self._last_ticks, ticks))
        self._last, self._last_ticks = reading, ticks

    def _node_between(self, before: CpuTicks | None, after: CpuTicks | None) -> NodeView:
        """The node with its clock source now and its CPU states between two readings of /proc/stat, where both were
        read."""
        node = self._node
        if self._clocksource is not None:
            source = self._clocksource()
            node = replace(node, clocksource=source.current, available_clocksources=source.available)
        if before is None or after is None:
            return node
        return replace(node, cpu=CpuShares(**vars(percentages(before, after))))

    def _evaluate(self, window: Window, node: NodeView) -> list[Row]:
        # A workload that did nothing in the window scores 0: only those that changed are looked at (at 1,000
        # idle workloads that is most of an evaluation's cost).
        views = [
            view
            for view in (
                with_budget_inputs(window, workload_view(window, ref, self._node.cpus))
                for ref in changed_workloads(window)
            )
            if view.ref.cgroup not in CATCH_ALL and score(view, self._node) >= FLAG_SCORE
        ]
        if self._count_workers is not None:
            self._workers = self._count_workers([view.ref for view in views][:MAX_SERIES])
        diagnosis = diagnose(Facts(node=node, workloads=tuple(views), sources=(metrics.FINDING.name,)))
        rows: set[Row] = {
            (
                finding.cause.value,
                finding.mechanism.value,
                finding.workload.container_id,
                finding.workload.container,
                finding.workload.pod,
                finding.workload.namespace,
                finding.workload.cgroup,
            )
            for finding in diagnosis.findings
        }
        return sorted(rows)[:MAX_SERIES]
