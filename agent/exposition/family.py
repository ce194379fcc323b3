"""Metric families as rows: what collectors fill with ``add_metric`` and the text writer turns into lines."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

LabelValues = tuple[str, ...]
Bucket = tuple[str, float]  # (le, cumulative count)


class RowFamily(Metric):
    """A family whose series are rows of label values (in ``labelnames`` order), not Sample objects.

    It is a prometheus_client Metric: ``samples`` builds the Sample objects on first use, for readers that want
    them (tests, prometheus_client's own writer); the text writer reads the rows and never builds them. Setting
    ``samples`` replaces the rows: the writer then writes those samples.
    """

    def __init__(self, name: str, documentation: str, kind: str, labelnames: Sequence[str]) -> None:
        self.labelnames = tuple(labelnames)
        self.blocks: list[Sequence[Any]] = []  # the rows, in blocks (each subclass's row type)
        self._open: list[Any] | None = None  # the block add_metric appends to
        super().__init__(name, documentation, kind)
        self._samples: list[Sample] | None = None  # Metric's __init__ set samples to []: the rows stand for them

    @property
    def rows(self) -> list[Any]:
        """Every row, in order (a new list)."""
        return [row for block in self.blocks for row in block]

    @rows.setter
    def rows(self, rows: Sequence[Any]) -> None:
        self.blocks, self._open = [list(rows)], None

    def add_block(self, rows: Sequence[Any]) -> None:
        """Rows made together that never change afterwards (one workload's series of this family). The writer
        formats a block once and reuses its text while the same object comes back in later scrapes."""
        self.blocks.append(rows)
        self._open = None

    def add_blocks(self, blocks: Iterable[Sequence[Any]]) -> None:
        """Several blocks (``add_block``), in order."""
        self.blocks.extend(blocks)
        self._open = None

    def _add_row(self, row: Any) -> None:
        if self._open is None:
            self._open = []
            self.blocks.append(self._open)
        self._open.append(row)

    @property
    def samples(self) -> list[Sample]:
        """The rows as prometheus_client samples (built once, when first asked for)."""
        if self._samples is None:
            self._samples = self.build_samples()
        return self._samples

    @samples.setter
    def samples(self, samples: list[Sample]) -> None:
        self._samples = list(samples)

    @property
    def replaced(self) -> bool:
        """Whether ``samples`` was built or set: the writer writes the samples, not the rows."""
        return self._samples is not None

    def build_samples(self) -> list[Sample]:
        """Every row as Samples."""
        raise NotImplementedError

    def label_rows(self) -> list[LabelValues]:
        """The label values of every row, in order."""
        return [row[0] for block in self.blocks for row in block]

    def keep_rows(self, keep: Sequence[bool]) -> None:
        """Keep only the rows whose flag (in ``label_rows`` order) is true."""
        self.rows = [row for row, kept in zip(self.rows, keep, strict=True) if kept]


class Family(RowFamily):
    """A counter or gauge family of ``(label values, value)`` rows."""

    def add_metric(self, labels: Sequence[str], value: float) -> None:
        """One series: its label values, in ``labelnames`` order, and its value."""
        self._add_row((tuple(labels), value))

    def sample_name(self) -> str:
        """The name its series carry (counters end in ``_total``)."""
        return self.name + "_total" if self.type == "counter" else self.name

    def build_samples(self) -> list[Sample]:
        """Every row as a Sample."""
        name, names = self.sample_name(), self.labelnames
        return [Sample(name, dict(zip(names, values, strict=True)), value) for values, value in self.rows]


class HistogramFamily(RowFamily):
    """A histogram family: per row, the bucket bounds (``le`` values, +Inf last), the cumulative count of each
    bucket, and the sum of observations. Rows of one family share one tuple of bounds."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        super().__init__(name, documentation, "histogram", labelnames)

    def add_metric(self, labels: Sequence[str], buckets: Sequence[Bucket], sum_value: float) -> None:
        """One histogram: label values, cumulative (le, count) buckets ending with +Inf, and the sum."""
        self._add_row((tuple(labels), tuple(le for le, _ in buckets), [count for _, count in buckets], sum_value))

    def build_samples(self) -> list[Sample]:
        """Each histogram's buckets, count and sum as Samples (prometheus_client's order)."""
        samples = []
        for values, les, counts, sum_value in self.rows:
            labels = dict(zip(self.labelnames, values, strict=True))
            for le, count in zip(les, counts, strict=True):
                samples.append(Sample(self.name + "_bucket", {**labels, "le": le}, count))
            samples.append(Sample(self.name + "_count", labels, counts[-1]))
            samples.append(Sample(self.name + "_sum", labels, sum_value))
        return samples


Blocks = tuple[tuple[Any, ...], ...]  # one workload's block of rows of each of several families


class BlockCache:
    """Per label set (a workload), its blocks of rows of several families, made again only when their input
    changed: an idle workload's blocks come back as the same objects, which the writer does not format again.

    *make* turns (label values, input) into that workload's rows of each family, in the families' order. Give
    inputs that compare equal when the rows would be equal, best the same object while they stand (a
    CounterTable's totals).
    """

    def __init__(self, make: Callable[[LabelValues, Any], Sequence[Sequence[Any]]]) -> None:
        self._make = make
        self._last: dict[LabelValues, tuple[Any, Blocks]] = {}

    def add_to(self, families: Sequence[RowFamily], inputs: Iterable[tuple[LabelValues, Any]]) -> None:
        """Add each (label values, input)'s blocks to *families*, in order; only those seen here are remembered."""
        last, kept = self._last, {}
        for labels, value in inputs:
            known = last.get(labels)
            if known is None or (known[0] is not value and known[0] != value):
                known = (value, tuple(tuple(rows) for rows in self._make(labels, value)))
            kept[labels] = known
        self._last = kept
        made = [known[1] for known in kept.values()]
        for index, family in enumerate(families):
            family.add_blocks([blocks[index] for blocks in made])
