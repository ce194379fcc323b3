"""The base of every collector over one BPF probe: read the maps once a scrape, fold them into per-workload totals,
and turn the totals into the series its table (agent/tables/) declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client.core import Metric

from agent.collectors import CollectorContext
from agent.collectors.common.self_metrics import self_families
from agent.collectors.common.table_series import TableSeries
from agent.collectors.common.top import TopProcesses
from agent.collectors.common.totals import CgroupTotals
from agent.exposition.family import BlockCache, RowFamily
from agent.identity.placement import ProcessKeys
from agent.identity.workload import process_labels
from agent.machine.procfs import ProcFS
from agent.tables.rows import Table


class BpfCollector:
    """A collector over one BPF probe whose maps are keyed by cgroup id (and by process, opt-in), exporting the rows
    of its *table*.

    The probe decodes each `cgroups` value into the table's vector of totals (agent/tables/rows.py Layout), once per
    change of its bytes. Each scrape folds the vectors into monotonic per-workload totals and makes each workload's
    rows of the table's families; a workload whose totals did not change since the last scrape gets the rows made
    then: no Python work per series for idle workloads. The per-process series are the table's per-process rows of
    the most active processes (``process_families``). A subclass adds ``snapshot_families`` (families made from more
    of the snapshot than the per-workload vectors).
    """

    name: str
    table: Table

    def __init__(self, context: CollectorContext, probe: Any) -> None:
        """*probe*: loaded with ``self.table.layout.vector`` as the decoder of its `cgroups` values."""
        self._keys = context.keys
        self._identities = context.identities
        self._probe = probe
        if isinstance(context.keys, ProcessKeys):
            probe.announce_to(context.keys)
            context.keys.add_announcer(probe)
        self._series = TableSeries(self.table)
        self._totals = CgroupTotals(
            context.keys,
            context.identities,
            self.table.layout.width,
            context.settings.series_grace_seconds,
            probe.forget_cgroups,
        )
        self._top = TopProcesses(context.settings.process_top_k)
        self._proc = ProcFS()
        self._blocks = BlockCache(self._series.series)

    def collect(self) -> list[Metric]:
        """Read the maps once and build every family of this collector."""
        self._keys.sync()
        snapshot = self._probe.read()
        self._totals.update(snapshot.cgroups, self._read_again)
        return [
            *self._workload_families(),
            *self.process_families(snapshot.processes),
            *self.snapshot_families(snapshot),
            *self_families(self.name, snapshot.health, self._probe.program_stats(), len(self._totals)),
        ]

    def _read_again(self, keys: list[int]) -> dict[int, Sequence[int]]:
        """The vectors of *keys* as the kernel map holds them now (those still there)."""
        found: dict[int, Sequence[int]] = self._probe.read_cgroups(keys)
        return found

    def _workload_families(self) -> list[RowFamily]:
        """The workload families, each workload's rows made again only when its totals changed."""
        families = self._series.families()
        self._blocks.add_to(families, self._totals.rows())
        return families

    def close(self) -> None:
        """Detach the programs."""
        self._probe.close()

    def process_families(self, processes: dict[int, Any]) -> list[Metric]:
        """The table's per-process families, with the rows of the most active live processes (by the table's
        activity fields); empty families while per-process accounting is off."""
        totals = {pid: self._series.process_vector(value) for pid, value in processes.items()}
        activity = {pid: self._series.activity(vector) for pid, vector in totals.items()}
        chosen = self._top.select(activity)
        places = self._keys.place({processes[pid].cgroup_id for pid in chosen})
        rows = []
        for pid in chosen:
            path = places[processes[pid].cgroup_id].path
            rows.append((process_labels(pid, path, self._identities, self._proc), totals[pid]))
        return self._series.process_families(rows)

    def snapshot_families(self, snapshot: Any) -> list[Metric]:
        """Families made from more of the snapshot than the per-workload vectors (none unless a subclass has some)."""
        return []
