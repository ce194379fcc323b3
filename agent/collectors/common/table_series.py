"""A table's rows made series: the families of a collector's rows, one workload's rows of each from its vector of
totals (agent/tables/rows.py Layout), and the per-process series of the same fields."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client.core import Metric

from agent.collectors.common.histograms import bucket_labels, cumulative
from agent.exposition.family import RowFamily
from agent.model import Labels
from agent.tables.rows import Counter, Histogram, Layout, Row, Table

# One workload's (or process's) rows of one family, from its label values and its vector of totals.
Rows = Callable[[Labels, Sequence[int]], list[Any]]


class TableSeries:
    """The series of a table's rows."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._rows = [_rows(row, table.layout) for row in table.rows]
        processed = [row for row in table.rows if row.process is not None]
        self._process_specs = [row.process for row in processed if row.process is not None]
        self._process_rows = [_process_rows(row, table.process_layout) for row in processed]
        layout = table.process_layout
        self._activity = [
            index for name in table.activity for index in range(layout.slices[name].start, layout.slices[name].stop)
        ]

    def families(self) -> list[RowFamily]:
        """The empty per-workload families, in the table's order."""
        return [row.spec.family() for row in self.table.rows]

    def series(self, labels: Labels, totals: Sequence[int]) -> list[list[Any]]:
        """One workload's rows of each family of :meth:`families`."""
        return [make(labels, totals) for make in self._rows]

    def process_vector(self, value: Any) -> tuple[int, ...]:
        """A per-process map value's totals, in the table's process layout."""
        return self.table.process_layout.vector(value)

    def activity(self, totals: Sequence[int]) -> int:
        """How active a process is: the sum of the table's activity fields."""
        return sum(totals[index] for index in self._activity)

    def process_families(self, processes: Iterable[tuple[Sequence[str], Sequence[int]]]) -> list[Metric]:
        """The per-process families of the table (empty ones without processes), with the rows of each (labels,
        totals) of *processes*."""
        families = [spec.family() for spec in self._process_specs]
        for labels, totals in processes:
            for family, make in zip(families, self._process_rows, strict=True):
                for row in make(tuple(labels), totals):
                    family.add_metric(*row)
        return list(families)


def _value(divisor: float) -> Callable[[int], float]:
    """A field's number in exported units (a count stays the int it is)."""
    if divisor == 1:
        return lambda number: number
    return lambda number: number / divisor


def _rows(row: Row, layout: Layout) -> Rows:
    if isinstance(row, Histogram):
        return _histogram_rows(row, layout)
    return _counter_rows(row, layout, row.only_nonzero)


def _counter_rows(row: Counter, layout: Layout, only_nonzero: bool) -> Rows:
    at = layout.slices[row.field]
    value = _value(row.divisor)
    if row.by is None:
        index = at.start
        if only_nonzero:
            return lambda labels, totals: [(labels, value(totals[index]))] if totals[index] else []
        return lambda labels, totals: [(labels, value(totals[index]))]
    names = row.by.values
    if only_nonzero:
        return lambda labels, totals: [
            ((*labels, name), value(number)) for name, number in zip(names, totals[at], strict=True) if number
        ]
    return lambda labels, totals: [
        ((*labels, name), value(number)) for name, number in zip(names, totals[at], strict=True)
    ]


def _histogram_rows(row: Histogram, layout: Layout) -> Rows:
    buckets, total = layout.slices[row.buckets], layout.slices[row.sum].start
    les = bucket_labels(row.bounds)
    value = _value(row.divisor)
    return lambda labels, totals: [(labels, les, cumulative(totals[buckets]), value(totals[total]))]


def _process_rows(row: Row, layout: Layout) -> Rows:
    """Per-process rows of the same field: a histogram's sum field as a counter of its own."""
    if isinstance(row, Histogram):
        index, value = layout.slices[row.sum].start, _value(row.divisor)
        return lambda labels, totals: [(labels, value(totals[index]))]
    return _counter_rows(row, layout, row.only_nonzero)
