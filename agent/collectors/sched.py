"""The sched collector: off-CPU time by reason, run-queue latency (and its split by holder), blocked time by sleep and
processes exited per workload (and off-CPU time and run-queue wait per process)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.sched import REQUIRED_TRACEPOINTS, PairEntry, SchedProbe, SchedSnapshot
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.bpf_collector import BpfCollector
from agent.collectors.common.code_rows import renamed
from agent.collectors.common.limits import probe_limits
from agent.collectors.common.ranked_rows import RankedTable, Row
from agent.identity.labels import label_value
from agent.identity.workload import workload_for_cgroup
from agent.machine.facts import MachineFacts
from agent.model import Labels
from agent.symbols.names import OTHER
from agent.tables.sched import TABLE

NAME = TABLE.collector
# Neighbours exported per workload: those that held its CPUs most lately (agent/collectors/common/ranked_rows.py: a
# neighbour holding more than twice the weakest named one's in a read takes its place once that one was named 60 s).
NEIGHBOURS_PER_WORKLOAD = 3
OTHER_NEIGHBOURS: Row = (OTHER,)  # the rest of its wait held by other workloads


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the scheduler tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SchedCollector(BpfCollector):
    """Off-CPU time, run-queue latency, blocked time and processes exited per workload (and per process for those
    that waited longest for a CPU): agent/tables/sched.py; and each workload's wait for a CPU by the neighbour that
    held it."""

    name = NAME
    table = TABLE

    def __init__(
        self, context: CollectorContext, probe: SchedProbe | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """*probe*: read instead of loading the program (tests hand fixture snapshots in); *clock*: what the
        neighbours' hold time is counted on."""
        if probe is None:
            probe = SchedProbe(probe_limits(context.settings, context.keys), context.facts.tracefs, TABLE.layout.vector)
        super().__init__(context, probe)
        grace = context.settings.series_grace_seconds
        self._neighbours = RankedTable(NEIGHBOURS_PER_WORKLOAD, grace, OTHER_NEIGHBOURS, clock)
        self._pair_ns: dict[PairEntry, int] = {}  # each pair entry's nanoseconds at the last read
        self._waiter_labels: dict[int, Labels] = {}  # each waiting workload key's labels when last placed

    def snapshot_families(self, snapshot: SchedSnapshot) -> list[Metric]:
        """Each workload's wait for a CPU held by another workload: its top neighbours by what they held lately, and
        (other) with the rest."""
        self._neighbours.add(self._neighbour_gains(snapshot.neighbours))
        self._neighbours.expire(labels for labels, _totals in self._totals.rows())
        kept = {labels for labels, _ranked in self._neighbours.items()}
        self._waiter_labels = {key: labels for key, labels in self._waiter_labels.items() if labels in kept}
        family = metrics.RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS.family()
        for labels, ranked in self._neighbours.items():
            for row, ns in ranked.rows(OTHER_NEIGHBOURS):
                family.add_metric([*labels, *row], ns / 1e9)  # type: ignore[misc]
        return [family]

    def _neighbour_gains(self, pairs: dict[PairEntry, int]) -> dict[Hashable, dict[Row, int]]:
        """What each waiting workload's neighbours held of its CPUs since the last read, by neighbour name. A pair
        entry is a source of its own: one the kernel evicted and made again (a new *since*) starts from 0, and one
        not seen before counts whole."""
        places = self._keys.place({key for waiter, holder, _since in pairs for key in (waiter, holder)})
        gains: dict[Hashable, dict[Row, int]] = {}
        waiters: dict[int, Labels] = {}
        read: dict[PairEntry, int] = {}
        for entry, ns in pairs.items():
            waiter, holder, _since = entry
            waiting, holding = places.get(waiter), places.get(holder)
            if waiting is None or holding is None:
                if entry in self._pair_ns:  # counted up to there: carry on from it once it is placed again
                    read[entry] = self._pair_ns[entry]
                continue
            read[entry] = ns
            waiter_labels = workload_for_cgroup(waiting.path, self._identities).labels()
            if waiting.path is not None:  # a cgroup gone keeps the labels its rows have (not "(removed)")
                waiters[waiter] = waiter_labels
            neighbour = workload_for_cgroup(holding.path, self._identities)
            if neighbour.labels() == waiter_labels:
                continue  # two cgroups of one workload: its own threads, not a neighbour
            gain = ns - self._pair_ns.get(entry, 0)
            if gain > 0:
                rows = gains.setdefault(waiter_labels, {})
                row = (label_value(neighbour.name),)
                rows[row] = rows.get(row, 0) + gain
        self._pair_ns = read
        for old, new in renamed(self._waiter_labels, waiters).items():
            self._neighbours.rename(old, new)
        self._waiter_labels.update(waiters)
        return gains


FACTORY = CollectorFactory(
    NAME, "off-CPU time (preempted, blocked) and run-queue latency (bpf/sched.bpf.c)", check, SchedCollector
)
