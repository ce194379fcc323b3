"""One reading of schedwatch's series, whatever served them, as totals per workload and per exported process.

The same reader takes metric families collected in this process (their rows read as they are, no Sample objects)
and families parsed from a /metrics text (prometheus_client ``Metric`` objects whose samples carry the full sample
name). Which sample is what comes from agent/series/schema.py. A workload with no series of a running BPF collector
had no event of that kind: its count is 0. A collector that is not running gives no count at all (None), never 0;
nor does a series its mode cannot give.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter
from typing import Any

from prometheus_client.core import Metric

from agent.exposition.family import Family, HistogramFamily, RowFamily
from agent.identity.workload import Workload
from agent.metrics import WORKLOAD_LABELS, HistogramSpec, MetricSpec
from agent.series.schema import (
    AGENT,
    BUCKET,
    COUNT,
    MODE,
    PART,
    ROLES,
    SOURCE_UP,
    UNKNOWN_IN_MODE,
    ZERO_WHEN_ABSENT,
    Role,
    key_of,
)

WIDTH = len(WORKLOAD_LABELS)
Values = tuple[str, ...]


class NotSchedwatch(ValueError):
    """The series read are not a schedwatch agent's."""


@dataclass
class Totals:
    """Cumulative counts, current gauges and histogram buckets of one workload (or process) at one reading, each
    by key (agent/series/schema.py) and part."""

    counts: dict[str, dict[str, float]] = field(default_factory=dict)
    gauges: dict[str, dict[str, float]] = field(default_factory=dict)
    buckets: dict[str, dict[str, float]] = field(default_factory=dict)  # key -> `le` -> cumulative count
    no_value: set[tuple[str, str]] = field(default_factory=set)  # (key, part) whose series had no number (NaN)

    def count(self, spec: MetricSpec, part: str = "") -> float | None:
        """*spec*'s count (a histogram: its sum) for *part*; None without its series."""
        return self.counts.get(key_of(spec), {}).get(part)

    def parts(self, spec: MetricSpec) -> dict[str, float]:
        """*spec*'s counts by part (the values of its labels beyond the workload's, PART-joined)."""
        return self.counts.get(key_of(spec), {})

    def gauge(self, spec: MetricSpec, part: str = "") -> float | None:
        """*spec*'s value for *part*; None without its series."""
        return self.gauges.get(spec.name, {}).get(part)

    def histogram(self, spec: HistogramSpec) -> dict[float, float]:
        """*spec*'s cumulative bucket counts by upper bound (+Inf included); empty without its series."""
        return {float(le): count for le, count in self.buckets.get(spec.name, {}).items()}


@dataclass(frozen=True)
class Process:
    """A process of a workload, as its per-process series name it."""

    ref: Workload
    pid: int
    comm: str


@dataclass(frozen=True)
class Reading:
    """schedwatch's series at one moment: which collectors ran, every workload's totals, every exported process's."""

    at: float  # seconds on a monotonic clock (or the time series' timestamp)
    up: frozenset[str]  # collectors running
    workloads: dict[Workload, Totals]
    unknown: frozenset[str] = frozenset()  # keys the agent's mode cannot give
    processes: dict[Process, Totals] = field(default_factory=dict)

    def count(self, ref: Workload, spec: MetricSpec, part: str = "") -> float | None:
        """A workload's cumulative count: its series, 0 when its running collector exported none, else None."""
        key = key_of(spec)
        totals = self.workloads.get(ref)
        if totals is not None:
            if (key, part) in totals.no_value:
                return None
            value = totals.counts.get(key, {}).get(part)
            if value is not None:
                return value
        collector = ZERO_WHEN_ABSENT.get(key)
        return 0.0 if collector is not None and collector in self.up and key not in self.unknown else None

    def lacks_value(self, ref: Workload, spec: MetricSpec, part: str = "") -> bool:
        """Whether a series of the workload's count was there without a number (a NaN from Prometheus)."""
        totals = self.workloads.get(ref)
        return totals is not None and (key_of(spec), part) in totals.no_value

    def knows(self, spec: MetricSpec) -> bool:
        """Whether *spec* can be known here: not a series the agent's mode cannot give."""
        return key_of(spec) not in self.unknown

    @cached_property
    def kinds(self) -> frozenset[str]:
        """The keys any workload of the reading has a count of."""
        return frozenset(key for totals in self.workloads.values() for key in totals.counts)

    def has(self, spec: MetricSpec) -> bool:
        """Whether any workload of the reading has a count of *spec*."""
        return key_of(spec) in self.kinds


def ref_of(labels: dict[str, str]) -> Workload:
    """The workload a sample's labels name."""
    return Workload(*(labels.get(name, "") for name in WORKLOAD_LABELS))


def part_of(role: Role, labels: dict[str, str]) -> str:
    """The part of a sample of *role* from its labels."""
    return PART.join(labels.get(name, "") for name in role.parts)


class _Reader:
    """The totals of one reading, filled family by family."""

    def __init__(self) -> None:
        self.workloads: dict[Values, Totals] = {}  # by label values: a tuple hashes faster than a Workload
        self.processes: dict[Process, Totals] = {}
        self.up: set[str] = set()
        self.unknown: frozenset[str] = frozenset()
        self.agent = False

    def of(self, values: Values) -> Totals:
        totals = self.workloads.get(values)
        if totals is None:
            totals = self.workloads[values] = Totals()
        return totals

    def of_process(self, labels: dict[str, str]) -> Totals | None:
        pid = labels.get("pid", "")
        if not pid.isdigit():
            return None
        process = Process(ref_of(labels), int(pid), labels.get("comm", ""))
        totals = self.processes.get(process)
        if totals is None:
            totals = self.processes[process] = Totals()
        return totals

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        """One sample of a parsed family."""
        role = ROLES.get(name)
        if role is None:
            self.special(name, labels, value)
            return
        totals = self.of_process(labels) if role.process else self.of(tuple(labels.get(n, "") for n in WORKLOAD_LABELS))
        if totals is None:
            return
        if role.kind == BUCKET:
            add(totals.buckets, role.key, labels.get("le", ""), value)
        else:
            put(totals, role, part_of(role, labels), value)

    def special(self, name: str, labels: dict[str, str], value: float) -> None:
        """The agent's own series a reading keeps: that it is schedwatch, its mode, the collectors running."""
        if name == AGENT:
            self.agent = True
        elif name == MODE:
            self.unknown = UNKNOWN_IN_MODE.get(labels.get("mode", ""), frozenset())
        elif name == SOURCE_UP and value == 1:
            self.up.add(labels.get("source", ""))

    def rows(self, family: RowFamily) -> bool:
        """Take a workload family's rows as they are (no Sample objects); False for a family to read by its
        samples (the agent's own series, a per-process family, one without the workload labels)."""
        way = self.way_of(family)
        if way is None:
            return False
        if way is not SKIP:
            for block in family.blocks:
                self.block(way, block)
        return True

    def way_of(self, family: RowFamily) -> _Way | None:
        """How to take *family*'s rows (SKIP: not read at all); None for a family to read by its samples."""
        if isinstance(family, HistogramFamily):
            role = ROLES.get(family.name + "_sum")
        elif isinstance(family, Family):
            role = ROLES.get(family.sample_name())
        else:
            return None
        if role is None:
            return None if family.name in (AGENT, MODE, SOURCE_UP) else SKIP  # read by its samples, or not at all
        names = family.labelnames
        if role.process or not set(WORKLOAD_LABELS) <= set(names):
            return None
        histogram = family.name if isinstance(family, HistogramFamily) else None
        return _Way(role, _picker(names, WORKLOAD_LABELS), _picker(names, role.parts), histogram)

    def block(self, way: _Way, block: Sequence[Any]) -> None:
        """One block of a family's rows, read *way*."""
        role, workload, part = way.role, way.workload, way.part
        if way.histogram is not None:
            for values, les, counts, total in block:
                totals = self.of(workload(values))
                put(totals, role, part(values), total)
                buckets = totals.buckets.get(way.histogram)
                if buckets is None:
                    totals.buckets[way.histogram] = dict(zip(les, counts, strict=True))
                else:
                    for le, count in zip(les, counts, strict=True):
                        buckets[le] = buckets.get(le, 0.0) + count
            return
        for values, value in block:
            put(self.of(workload(values)), role, part(values), value)

    def reading(self, at: float, workloads: dict[Values, Totals] | None = None, refs: _Refs | None = None) -> Reading:
        """The reading of what was read (*workloads*, where given, instead of the totals read here)."""
        if not self.agent:
            raise NotSchedwatch(f"no {AGENT} series")
        by_values = self.workloads if workloads is None else workloads
        ref = refs.of if refs is not None else (lambda values: Workload(*values))
        merged = merge_unnamed({ref(values): totals for values, totals in by_values.items()})
        return Reading(at, frozenset(self.up), merged, self.unknown, self.processes)


@dataclass(frozen=True)
class _Way:
    """How to read the rows of one family: its role, the pickers of a row's workload and part, and for a histogram
    its name (None otherwise)."""

    role: Role
    workload: Any
    part: Any
    histogram: str | None


SKIP = _Way(Role("", COUNT, (), False), None, None, None)  # a family the reading leaves out


class _Refs:
    """Workloads by label values, the same object while they are seen."""

    def __init__(self) -> None:
        self._last: dict[Values, Workload] = {}
        self._now: dict[Values, Workload] = {}

    def of(self, values: Values) -> Workload:
        ref = self._last.get(values)
        if ref is None:
            ref = Workload(*values)
        self._now[values] = ref
        return ref

    def end(self) -> None:
        self._last, self._now = self._now, {}


def _picker(names: tuple[str, ...], wanted: tuple[str, ...]) -> Any:
    """A function from a row's label values to those of *wanted* (a part: PART-joined; the workload: a tuple)."""
    at = [names.index(name) for name in wanted]
    if wanted is WORKLOAD_LABELS:
        if at == list(range(WIDTH)):
            return itemgetter(slice(0, WIDTH))
        return itemgetter(*at)
    if not at:
        return lambda values: ""
    if len(at) == 1:
        return itemgetter(at[0])
    pick = itemgetter(*at)
    return lambda values: PART.join(pick(values))


def put(totals: Totals, role: Role, part: str, value: float) -> None:
    """Keep one series' value: a count added (a series seen twice sums), a gauge set; a NaN as no value."""
    if math.isnan(value):
        if role.kind == COUNT:
            totals.no_value.add((role.key, part))
        return
    if role.kind == COUNT:
        add(totals.counts, role.key, part, value)
    else:
        by_part = totals.gauges.get(role.key)
        if by_part is None:
            by_part = totals.gauges[role.key] = {}
        by_part[part] = value


def add(into: dict[str, dict[str, float]], key: str, part: str, value: float) -> None:
    """*value* added to *into*[key][part]."""
    by_part = into.get(key)
    if by_part is None:
        into[key] = {part: value}
    else:
        by_part[part] = by_part.get(part, 0.0) + value


def read_families(families: Iterable[Metric], at: float) -> Reading:
    """A Reading of metric families; NotSchedwatch when they hold no build-info series."""
    reader = _Reader()
    for family in families:
        if isinstance(family, RowFamily) and not family.replaced and reader.rows(family):
            continue
        for sample in family.samples:
            reader.sample(sample.name, sample.labels, sample.value)
    return reader.reading(at)


class FamiliesReader:
    """Reads the families of this process's successive scrapes into Readings, a workload's totals made again only
    when its series may have changed.

    A block of rows (agent/exposition/family.py) never changes once made: an idle workload's blocks come back as the
    same objects. A workload whose blocks are all the ones it had at the last read, as many, and whose other rows
    (families filled row by row) read the same, has the same totals: the last Totals object is its totals again (and
    the evaluation, comparing the two readings, finds it unchanged at once). At 1,000 workloads, reading every row of
    every scrape handed over (55,000 series) was half of the standing evaluation's cost.
    """

    def __init__(self) -> None:
        self._blocks: dict[Values, list[Sequence[Any]]] = {}  # each workload's blocks at the last read, in order
        self._loose: dict[Values, Totals] = {}  # each workload's totals of its other rows at the last read
        self._totals: dict[Values, Totals] = {}  # each workload's totals at the last read
        self._refs = _Refs()

    def read(self, families: Iterable[Metric], at: float) -> Reading:
        """A Reading of *families*; NotSchedwatch when they hold no build-info series."""
        reader = _Reader()  # its workloads: the totals of rows outside workloads' blocks
        last_blocks = self._blocks
        blocks: dict[Values, list[Sequence[Any]]] = {}
        ways: dict[Values, list[_Way]] = {}  # how to read each of a workload's blocks
        changed: set[Values] = set()
        for family in families:
            way = reader.way_of(family) if isinstance(family, RowFamily) and not family.replaced else None
            if way is None or not isinstance(family, RowFamily):
                for sample in family.samples:
                    reader.sample(sample.name, sample.labels, sample.value)
                continue
            if way is SKIP:
                continue
            workload = way.workload
            for block in family.blocks:
                if not block:
                    continue
                owner = workload(block[0][0])
                mine = blocks.get(owner)
                if mine is None:
                    mine = blocks[owner] = []
                    ways[owner] = []
                last = last_blocks.get(owner)
                if last is None or len(mine) >= len(last) or last[len(mine)] is not block:
                    if any(workload(row[0]) != owner for row in block):  # rows of several workloads, one by one
                        reader.block(way, block)
                        continue
                    changed.add(owner)  # a workload's block, new or made again
                mine.append(block)
                ways[owner].append(way)
        loose, reader.workloads = reader.workloads, {}
        totals: dict[Values, Totals] = {}
        for values in [*blocks, *(values for values in loose if values not in blocks)]:
            mine = blocks.get(values, [])
            last_totals = self._totals.get(values)
            if (
                last_totals is not None
                and values not in changed
                and len(mine) == len(last_blocks.get(values, ()))
                and loose.get(values) == self._loose.get(values)
            ):
                totals[values] = last_totals
                continue
            made = reader.workloads[values] = _copy(loose[values]) if values in loose else Totals()
            for way, block in zip(ways.get(values, []), mine, strict=True):
                reader.block(way, block)
            totals[values] = made
        reading = reader.reading(at, totals, self._refs)  # reader.workloads: only those made again
        self._refs.end()
        self._blocks = {values: mine for values, mine in blocks.items() if mine}
        self._loose, self._totals = loose, totals
        return reading


def _copy(totals: Totals) -> Totals:
    """A copy of *totals* that adding to leaves the original as it was."""
    return Totals(
        {key: dict(by_part) for key, by_part in totals.counts.items()},
        {key: dict(by_part) for key, by_part in totals.gauges.items()},
        {key: dict(by_le) for key, by_le in totals.buckets.items()},
        set(totals.no_value),
    )


def merge_unnamed(workloads: dict[Workload, Totals]) -> dict[Workload, Totals]:
    """Totals a container has under its id alone folded into its named totals.

    A container's names can arrive while the agent is collecting: then one scrape has one collector's series under
    the id alone and the next collector's under the names. They are one workload.
    """
    named = {ref.container_id: ref for ref in workloads if ref.container_id and (ref.container or ref.pod)}
    if not any(ref.container_id in named for ref in workloads if not (ref.container or ref.pod)):
        return workloads  # nothing to fold (the usual case)
    merged: dict[Workload, Totals] = {}
    for ref, totals in workloads.items():
        target = named.get(ref.container_id, ref) if ref.container_id and not (ref.container or ref.pod) else ref
        into = merged.setdefault(target, Totals())
        for key, by_part in totals.counts.items():
            for part, value in by_part.items():
                add(into.counts, key, part, value)
        for key, by_le in totals.buckets.items():
            for le, value in by_le.items():
                add(into.buckets, key, le, value)
        into.no_value |= totals.no_value
        for key, by_part in totals.gauges.items():
            kept = into.gauges.setdefault(key, {})
            for part, value in by_part.items():
                if target == ref or part not in kept:
                    kept[part] = value
    return merged
