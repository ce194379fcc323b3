"""The Prometheus text format (0.0.4), written by hand: each label set is formatted once and reused while it lives."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import Metric

from agent.exposition.family import Family, HistogramFamily, LabelValues

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_Line = tuple[str, float, str]  # a series' line start, its last value, and the whole line written for it
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
    """Writes metric families as the text format; keeps the formatted label sets of the last write.

    Rows of a RowFamily cost one dictionary lookup for their label string once it has been written before, and
    nothing more when their value did not change; what is remembered is the previous write's series only, so it
    never outlives them. Other Metric
    families (prometheus_client's process collector) are written sample by sample. Not thread-safe: one write at
    a time.
    """

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, LabelValues], dict[LabelValues, _Line]] = {}
        self._histograms: dict[tuple[str, LabelValues], dict[LabelValues, _Histogram]] = {}
        self._headers: dict[tuple[str, str, str], str] = {}

    def write(self, families: Iterable[Metric]) -> bytes:
        """The exposition text of *families*, UTF-8."""
        parts: list[str] = []
        prefixes: dict[tuple[str, LabelValues], dict[LabelValues, _Line]] = {}
        histograms: dict[tuple[str, LabelValues], dict[LabelValues, _Histogram]] = {}
        for family in families:
            if isinstance(family, Family) and not family.replaced:
                name = family.sample_name()
                parts.append(self._header(name, family.type, family.documentation))
                key = (name, family.labelnames)
                fresh = prefixes.setdefault(key, {})
                self._write_rows(parts, family, self._prefixes.get(key, {}), fresh)
            elif isinstance(family, HistogramFamily) and not family.replaced:
                parts.append(self._header(family.name, "histogram", family.documentation))
                key = (family.name, family.labelnames)
                fresh_histograms = histograms.setdefault(key, {})
                self._write_histograms(parts, family, self._histograms.get(key, {}), fresh_histograms)
            else:
                self._write_samples(parts, family)
        self._prefixes, self._histograms = prefixes, histograms
        return "".join(parts).encode("utf-8")

    def _header(self, name: str, kind: str, documentation: str) -> str:
        key = (name, kind, documentation)
        header = self._headers.get(key)
        if header is None:
            if len(self._headers) > 4096:  # a bound: only metric names and help texts end up here
                self._headers.clear()
            help_text = documentation.replace("\\", "\\\\").replace("\n", "\\n")
            header = self._headers[key] = f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
        return header

    @staticmethod
    def _write_rows(
        parts: list[str], family: Family, known: dict[LabelValues, _Line], fresh: dict[LabelValues, _Line]
    ) -> None:
        name, names = family.sample_name(), family.labelnames
        append = parts.append
        for values, value in family.rows:
            line = known.get(values)
            if line is None:
                prefix = f"{name}{label_string(names, values)} "
                line = (prefix, value, f"{prefix}{format_value(value)}\n")
            elif line[1] != value:
                line = (line[0], value, f"{line[0]}{format_value(value)}\n")
            fresh[values] = line
            append(line[2])

    @staticmethod
    def _write_histograms(
        parts: list[str],
        family: HistogramFamily,
        known: dict[LabelValues, _Histogram],
        fresh: dict[LabelValues, _Histogram],
    ) -> None:
        append = parts.append
        for values, les, counts, sum_value in family.rows:
            cached = known.get(values)
            if cached is None or cached.les != les:
                cached = _Histogram(family.name, family.labelnames, values, les)
            fresh[values] = cached
            append(cached.text(counts, sum_value))

    def _write_samples(self, parts: list[str], family: Metric) -> None:
        name, kind = family.name, _TYPES.get(family.type, "untyped")
        if family.type == "counter":
            name += "_total"
        elif family.type == "info":
            name, kind = name + "_info", "gauge"
        elif family.type == "stateset":
            kind = "gauge"
        parts.append(self._header(name, kind, family.documentation))
        for sample in family.samples:
            labels = label_string(tuple(sample.labels), tuple(sample.labels.values()))
            parts.append(f"{sample.name}{labels} {format_value(sample.value)}\n")


class _Histogram:
    """One histogram's line starts (buckets, count, sum), and its last lines with the values they were made of."""

    __slots__ = ("_counts", "_sum_value", "_text", "buckets", "count", "les", "sum")

    def __init__(self, name: str, names: LabelValues, values: LabelValues, les: tuple[str, ...]) -> None:
        self.les = les
        self.buckets = tuple(f"{name}_bucket{label_string((*names, 'le'), (*values, le))} " for le in les)
        labels = label_string(names, values)
        self.count = f"{name}_count{labels} "
        self.sum = f"{name}_sum{labels} "
        self._counts: Sequence[float] = ()
        self._sum_value = 0.0
        self._text = ""

    def text(self, counts: Sequence[float], sum_value: float) -> str:
        """The histogram's lines for these values (the last ones again when nothing changed)."""
        if counts != self._counts or sum_value != self._sum_value or not self._text:
            lines = [f"{prefix}{format_value(count)}\n" for prefix, count in zip(self.buckets, counts, strict=True)]
            lines.append(f"{self.count}{format_value(counts[-1])}\n{self.sum}{format_value(sum_value)}\n")
            self._counts, self._sum_value, self._text = counts, sum_value, "".join(lines)
        return self._text
