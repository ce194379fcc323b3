"""The base of every collector over one BPF probe: read the maps once a scrape, fold them into per-workload totals,
and let the subclass turn totals into families.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client.core import Metric

from agent.collectors import CollectorContext
from agent.collectors.common.self_metrics import self_families
from agent.collectors.common.top import TopProcesses
from agent.collectors.common.totals import CgroupTotals
from agent.exposition.family import BlockCache, RowFamily
from agent.identity.placement import ProcessKeys
from agent.identity.workload import process_labels
from agent.machine.procfs import ProcFS
from agent.model import Labels


class BpfCollector:
    """A collector over one BPF probe whose maps are keyed by cgroup id (and by process, opt-in).

    Each scrape reads the probe once, folds the per-cgroup vectors into monotonic per-workload totals, and asks the
    subclass for its families: ``cgroup_vector`` (what to keep per cgroup), ``workload_families`` and
    ``workload_series`` (the empty families, and one workload's rows of each from its totals) and
    ``process_families`` (for the processes chosen by ``chosen_processes``). A workload whose totals did not change
    since the last scrape gets the rows made then: no Python work per series for idle workloads.
    """

    name: str
    vector_width: int

    def __init__(self, context: CollectorContext, probe: Any) -> None:
        self._keys = context.keys
        self._identities = context.identities
        self._probe = probe
        if isinstance(context.keys, ProcessKeys):
            probe.announce_to(context.keys)
            context.keys.add_announcer(probe)
        self._totals = CgroupTotals(
            context.keys,
            context.identities,
            self.vector_width,
            context.settings.series_grace_seconds,
            probe.forget_cgroups,
        )
        self._top = TopProcesses(context.settings.process_top_k)
        self._proc = ProcFS()
        self._blocks = BlockCache(self.workload_series)

    def collect(self) -> list[Metric]:
        """Read the maps once and build every family of this collector."""
        self._keys.sync()
        snapshot = self._probe.read()
        vectors = {key: self.cgroup_vector(stats) for key, stats in snapshot.cgroups.items()}
        self._totals.update(vectors, self._read_again)
        return [
            *self._workload_families(),
            *self.process_families(snapshot.processes),
            *self.snapshot_families(snapshot),
            *self_families(self.name, snapshot.health, self._probe.program_stats(), len(self._totals)),
        ]

    def _read_again(self, keys: list[int]) -> dict[int, Sequence[int]]:
        """The vectors of *keys* as the kernel map holds them now (those still there)."""
        return {key: self.cgroup_vector(stats) for key, stats in self._probe.read_cgroups(keys).items()}

    def _workload_families(self) -> list[RowFamily]:
        """The workload families, each workload's rows made again only when its totals changed."""
        families = self.workload_families()
        self._blocks.add_to(families, self._totals.rows())
        return families

    def close(self) -> None:
        """Detach the programs."""
        self._probe.close()

    def chosen_processes(self, processes: dict[int, Any], activity: dict[int, int]) -> Iterator[tuple[list[str], Any]]:
        """(labels, process) of the top-K processes by *activity*, labelled with their workload."""
        chosen = self._top.select(activity)
        places = self._keys.place({processes[pid].cgroup_id for pid in chosen})
        for pid in chosen:
            path = places[processes[pid].cgroup_id].path
            yield process_labels(pid, path, self._identities, self._proc), processes[pid]

    def cgroup_vector(self, stats: Any) -> Sequence[int]:
        """The counters to keep per cgroup, in a fixed order of vector_width entries."""
        raise NotImplementedError

    def workload_families(self) -> list[RowFamily]:
        """The empty per-workload families, in the order of ``workload_series``."""
        raise NotImplementedError

    def workload_series(self, labels: Labels, totals: Sequence[int]) -> Sequence[list[Any]]:
        """One workload's rows of each family of ``workload_families`` (``Family.rows`` / ``HistogramFamily.rows``
        entries), from its totals."""
        raise NotImplementedError

    def process_families(self, processes: dict[int, Any]) -> list[Metric]:
        """Families of the per-process series (empty families when per-process accounting is off)."""
        raise NotImplementedError

    def snapshot_families(self, snapshot: Any) -> list[Metric]:
        """Families made from more of the snapshot than the per-workload vectors (none unless a subclass has some)."""
        return []
