"""The Prometheus text format (0.0.4), written by hand: each label set is formatted once and reused while it lives."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from prometheus_client.core import Metric

from agent.exposition.family import Family, HistogramFamily, LabelValues, RowFamily

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PRUNE_SLACK = 64  # label sets of gone series a family may keep beyond as many as it has
CHUNK_BLOCKS = 64  # blocks (one workload's rows of a family) per chunk of text
Chunk = tuple[tuple[str, int], list[bytes]]  # (family name, place in it), and the parts of its text
_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary"}


def escape_label_value(value: str) -> str:
    """A label value as the text format writes it between quotes."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_value(value: float) -> str:
    """A sample value as prometheus_client writes it: a float's repr ("3.0" for 3), +Inf, -Inf and NaN by name."""
    if value - value == 0:  # finite (an int or a float)
        return repr(float(value))
    if value != value:
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def label_string(names: Sequence[str], values: Sequence[str]) -> str:
    """``{name="value",...}`` (empty without labels)."""
    if not names:
        return ""
    pairs = zip(names, values, strict=True)
    return "{" + ",".join(f'{name}="{escape_label_value(value)}"' for name, value in pairs) + "}"


class TextWriter:
    """Writes metric families as the text format; remembers what it formatted for the next write.

    A block of rows (``RowFamily.add_block``) that comes back as the same object is its last text again: no
    Python work per series for idle workloads. Otherwise a row costs one dictionary lookup for its label string
    once it has been written before, and the formatting of its value. Remembered are the previous write's blocks
    and (pruned to about the series written) the formatted label sets. Other Metric families (the agent's own
    process_* series) are written sample by sample. Not thread-safe: one write at a time.
    """

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, LabelValues], dict[LabelValues, str]] = {}
        self._histograms: dict[tuple[str, LabelValues], dict[LabelValues, _Histogram]] = {}
        self._blocks: dict[int, tuple[Sequence[Any], bytes]] = {}
        self._headers: dict[tuple[str, str, str], bytes] = {}

    def write(self, families: Iterable[Metric]) -> bytes:
        """The exposition text of *families*, UTF-8."""
        return joined(self.write_chunks(families))

    def write_chunks(self, families: Iterable[Metric]) -> list[Chunk]:
        """The exposition text of *families* in chunks: each family's header and blocks, CHUNK_BLOCKS blocks a
        chunk, keyed by the family's name and the chunk's place in it (so that a chunk of idle workloads comes
        back under the same key with the same text)."""
        chunks: list[Chunk] = []
        blocks: dict[int, tuple[Sequence[Any], bytes]] = {}
        for family in families:
            if isinstance(family, Family) and not family.replaced:
                name = family.sample_name()
                parts = [self._header(name, family.type, family.documentation)]
                prefixes = self._prefixes.setdefault((name, family.labelnames), {})
                self._write_blocks(parts, blocks, family, partial(_rows_text, family, prefixes))
                _prune(prefixes, family)
            elif isinstance(family, HistogramFamily) and not family.replaced:
                name = family.name
                parts = [self._header(name, "histogram", family.documentation)]
                known = self._histograms.setdefault((name, family.labelnames), {})
                self._write_blocks(parts, blocks, family, partial(_histograms_text, family, known))
                _prune(known, family)
            else:
                name, parts = family.name, [self._samples_text(family)]
            chunks.extend(
                ((name, start), parts[start : start + CHUNK_BLOCKS]) for start in range(0, len(parts), CHUNK_BLOCKS)
            )
        self._blocks = blocks
        return chunks

    def _write_blocks(
        self,
        parts: list[bytes],
        blocks: dict[int, tuple[Sequence[Any], bytes]],
        family: RowFamily,
        text_of: Callable[[Sequence[Any]], bytes],
    ) -> None:
        known = self._blocks
        for block in family.blocks:
            cached = known.get(id(block))
            if cached is None or cached[0] is not block:  # held until the next write: no other object has its id
                cached = (block, text_of(block))
            blocks[id(block)] = cached
            parts.append(cached[1])

    def _header(self, name: str, kind: str, documentation: str) -> bytes:
        key = (name, kind, documentation)
        header = self._headers.get(key)
        if header is None:
            if len(self._headers) > 4096:  # a bound: only metric names and help texts end up here
                self._headers.clear()
            help_text = documentation.replace("\\", "\\\\").replace("\n", "\\n")
            header = self._headers[key] = f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n".encode()
        return header

    def _samples_text(self, family: Metric) -> bytes:
        name, kind = family.name, _TYPES.get(family.type, "untyped")
        if family.type == "counter":
            name += "_total"
        elif family.type == "info":
            name, kind = name + "_info", "gauge"
        elif family.type == "stateset":
            kind = "gauge"
        lines = []
        for sample in family.samples:
            labels = label_string(tuple(sample.labels), tuple(sample.labels.values()))
            lines.append(f"{sample.name}{labels} {format_value(sample.value)}\n")
        return self._header(name, kind, family.documentation) + "".join(lines).encode()


def joined(chunks: Iterable[Chunk]) -> bytes:
    """The whole text of *chunks*."""
    return b"".join([part for _key, parts in chunks for part in parts])


def _rows_text(family: Family, prefixes: dict[LabelValues, str], rows: Sequence[tuple[LabelValues, float]]) -> bytes:
    """The lines of counter or gauge rows; each row's line start formatted once (remembered in *prefixes*)."""
    name, names = family.sample_name(), family.labelnames
    lines = []
    for values, value in rows:
        prefix = prefixes.get(values)
        if prefix is None:
            prefix = prefixes[values] = f"{name}{label_string(names, values)} "
        lines.append(f"{prefix}{format_value(value)}\n")
    return "".join(lines).encode()


def _histograms_text(family: HistogramFamily, known: dict[LabelValues, _Histogram], rows: Sequence[Any]) -> bytes:
    """The lines of histogram rows; each histogram's line starts formatted once (remembered in *known*)."""
    texts = []
    for values, les, counts, sum_value in rows:
        cached = known.get(values)
        if cached is None or cached.les != les:
            cached = known[values] = _Histogram(family.name, family.labelnames, values, les)
        texts.append(cached.text(counts, sum_value))
    return "".join(texts).encode()


def _prune(known: dict[LabelValues, Any], family: RowFamily) -> None:
    """Forget the label sets of series gone from *family*, once they outnumber the ones it has (and a few more:
    the walk is then rare while workloads come and go)."""
    if len(known) <= 2 * sum(map(len, family.blocks)) + PRUNE_SLACK:
        return
    live = set(family.label_rows())
    for values in [values for values in known if values not in live]:
        del known[values]


class _Histogram:
    """One histogram's line starts: its buckets', its count's and its sum's."""

    __slots__ = ("buckets", "count", "les", "sum")

    def __init__(self, name: str, names: LabelValues, values: LabelValues, les: tuple[str, ...]) -> None:
        self.les = les
        self.buckets = tuple(f"{name}_bucket{label_string((*names, 'le'), (*values, le))} " for le in les)
        labels = label_string(names, values)
        self.count = f"{name}_count{labels} "
        self.sum = f"{name}_sum{labels} "

    def text(self, counts: Sequence[float], sum_value: float) -> str:
        """The histogram's lines for these values."""
        lines = [f"{prefix}{format_value(count)}\n" for prefix, count in zip(self.buckets, counts, strict=True)]
        lines.append(f"{self.count}{format_value(counts[-1])}\n{self.sum}{format_value(sum_value)}\n")
        return "".join(lines)
