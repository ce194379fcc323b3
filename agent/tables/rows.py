"""The row types of a collector's table: one row a metric, saying where its numbers are and how they become series.

A BPF collector's per-workload map holds one struct per workload key; each :class:`Counter` or :class:`Histogram`
row names the struct's field that feeds its metric, the label whose values the field's slots stand for (a
:class:`Decoder`, in the order of the C enum that indexes the field) and the unit the field counts in. From the
rows follow the vector of totals the collector keeps per workload (:class:`Layout`), the families and rows it
exports, the per-process series of the same fields, the series a reader finds, and the size of the map's value
(the kernel memory a --max-* flag preallocates, :mod:`agent.tables.kernel_memory`). What a collector makes by its
own code (a ranking of neighbours, a file's numbers) is listed as *computed*, so that readers and the docs' table
know it too.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from agent.metrics import CounterSpec, HistogramSpec, MetricSpec

U64 = 8  # bytes of every counting field: the structs' counters are u64 (slots of u64 for split ones)
NS_PER_SECOND = 1e9

# The bounds a --max-* flag sets, as bpf/*.bpf.c names them (the flags: --max-cgroups, --max-processes,
# --max-threads, --syscall-timed-workloads).
CGROUPS, PROCESSES, THREADS, TIMED = "MAX_CGROUPS", "MAX_PROCESSES", "MAX_THREADS", "MAX_TIMED"
BPF, PERF, PROCFS = "bpf", "perf", "procfs"  # where counts come from (--mode; docs/modes.md)
EVERY_MODE = (BPF, PERF, PROCFS)


@dataclass(frozen=True)
class Decoder:
    """A label whose values the slots of an array field stand for, slot by slot (the C enum's order)."""

    label: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Counter:
    """A counter fed by one field of the per-workload map's struct (an array field: one series per slot)."""

    spec: CounterSpec
    field: str
    by: Decoder | None = None
    divisor: float = 1  # the field's units per exported unit: NS_PER_SECOND for a field of nanoseconds
    only_nonzero: bool = False  # a series (a slot's series) only once it is not 0
    process: CounterSpec | None = None  # the same field of the per-process map, exported per live process

    @property
    def width(self) -> int:
        """Slots of the field."""
        return 1 if self.by is None else len(self.by.values)


@dataclass(frozen=True)
class Histogram:
    """A histogram fed by a field of per-bucket counts (not cumulative, +Inf last) and a field with their sum."""

    spec: HistogramSpec
    buckets: str
    bounds: tuple[float, ...]  # upper bounds of the buckets before +Inf
    sum: str
    divisor: float = 1
    process: CounterSpec | None = None  # the sum field of the per-process map, exported per live process
    sum_is: CounterSpec | None = None  # the counter another mode exports for what the sum counts


Row = Counter | Histogram


@dataclass(frozen=True)
class Bounded:
    """A bounded BPF map of the program: its key's bytes, its value's (None: the struct the rows read, plus
    *other_bytes* of fields no row reads), and the bound that sizes it, *times* entries per unit of the bound; a
    hash map unless *array*."""

    map: str
    bound: str
    key_bytes: int
    value_bytes: int | None = None
    other_bytes: int = 0
    times: int = 1
    array: bool = False


@dataclass(frozen=True)
class Table:
    """What one collector exports: its rows over the per-workload map *map* (and the per-process map
    *process_map*), what it computes itself, its bounded maps, and the modes it runs in."""

    collector: str
    modes: tuple[str, ...]
    program: str | None = None  # the BPF program's source in bpf/, None for a collector without one
    rows: tuple[Row, ...] = ()
    computed: tuple[MetricSpec, ...] = ()  # metrics the collector makes by its own code
    maps: tuple[Bounded, ...] = ()
    activity: tuple[str, ...] = ()  # per-process fields whose sum ranks the processes exported
    map: str = "cgroups"
    process_map: str = "processes"
    layout: Layout = field(init=False, compare=False, repr=False)
    process_layout: Layout = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        workload, process = fields_of(self.rows, self.collector)
        object.__setattr__(self, "layout", Layout(workload))
        object.__setattr__(self, "process_layout", Layout(process))

    @property
    def specs(self) -> tuple[MetricSpec, ...]:
        """Every metric the collector exports, its rows' first, then the per-process ones, then those computed."""
        processes = tuple(row.process for row in self.rows if row.process is not None)
        return (*(row.spec for row in self.rows), *processes, *self.computed)

    def value_bytes(self, bounded: Bounded) -> int:
        """The bytes of *bounded*'s value: given, or the fields the rows read of it and the others."""
        if bounded.value_bytes is not None:
            return bounded.value_bytes
        layout = self.layout if bounded.map == self.map else self.process_layout
        return U64 * layout.width + bounded.other_bytes


def fields_of(rows: Sequence[Row], collector: str) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
    """(field, slots) read from the per-workload struct and from the per-process struct, in the rows' order; a
    field two rows read is one (ValueError if they disagree on its slots)."""
    workload: dict[str, int] = {}
    process: dict[str, int] = {}

    def add(into: dict[str, int], name: str, width: int) -> None:
        if into.setdefault(name, width) != width:
            raise ValueError(f"table {collector}: field {name} read as {into[name]} and as {width} slots")

    for row in rows:
        if isinstance(row, Counter):
            add(workload, row.field, row.width)
            if row.process is not None:
                add(process, row.field, row.width)
        else:
            add(workload, row.buckets, len(row.bounds) + 1)
            add(workload, row.sum, 1)
            if row.process is not None:
                add(process, row.sum, 1)
    return tuple(workload.items()), tuple(process.items())


class Layout:
    """Where each field's slots sit in a vector of totals (the fields in order, each slot one number), and how to
    read that vector off a map's value: one unpack of the struct's bytes, one pick of the counting slots."""

    def __init__(self, fields: Sequence[tuple[str, int]]) -> None:
        self.fields = tuple(fields)
        self.slices: dict[str, slice] = {}
        start = 0
        for name, width in self.fields:
            self.slices[name] = slice(start, start + width)
            start += width
        self.width = start
        self._readers: dict[type, Callable[[Any], tuple[int, ...]]] = {}

    def vector(self, value: Any) -> tuple[int, ...]:
        """The totals of one map value (a ctypes struct with the fields), in this layout's order."""
        kind = type(value)
        reader = self._readers.get(kind)
        if reader is None:
            reader = self._readers[kind] = self._reader(kind)
        return reader(value)

    def _reader(self, kind: type) -> Callable[[Any], tuple[int, ...]]:
        size = ctypes.sizeof(kind)
        if size % U64:
            raise ValueError(f"{kind.__name__}: {size} bytes, not a whole number of u64 slots")
        picks: list[int] = []
        for name, width in self.fields:
            described = getattr(kind, name)
            if described.size != U64 * width or described.offset % U64:
                raise ValueError(
                    f"{kind.__name__}.{name}: {described.size} bytes at {described.offset}, not {width} u64"
                )
            first = described.offset // U64
            picks.extend(range(first, first + width))
        unpack = struct.Struct(f"={size // U64}Q").unpack
        if len(picks) == 1:
            only = picks[0]
            return lambda value: (unpack(value)[only],)
        pick = itemgetter(*picks)
        return lambda value: pick(unpack(value))

    def value_type(self) -> type:
        """A ctypes struct of exactly these fields (u64 slots), for values made outside the kernel (fixtures)."""
        layout = [(name, ctypes.c_uint64 * width if width > 1 else ctypes.c_uint64) for name, width in self.fields]
        return type("LaidOut", (ctypes.Structure,), {"_fields_": layout})
