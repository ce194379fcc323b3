"""The kernel memory each unit of a --max-* flag preallocates (BPF hash maps are preallocated at load), summed over
the bounded maps of every table: per entry of a hash map, an element header, the key and the value each rounded up
to 8 bytes, and one bucket, and per entry of an array its value rounded up to 8 bytes, as bpftool reports a map's
memlock on Linux 6.18. A value's bytes follow from the rows that read its
struct, so a counter added to a struct is counted here with its row."""

from __future__ import annotations

from agent.tables import TABLES
from agent.tables.rows import Bounded, Table

ELEMENT_HEADER = 48
BUCKET = 16


def entry_bytes(key_bytes: int, value_bytes: int) -> int:
    """Kernel bytes of one entry of a preallocated hash map."""
    return ELEMENT_HEADER + _rounded(key_bytes) + _rounded(value_bytes) + BUCKET


def map_bytes(table: Table, bounded: Bounded) -> int:
    """Kernel bytes of *bounded* per unit of its bound (an array's entry is its value, rounded up to 8 bytes)."""
    value_bytes = table.value_bytes(bounded)
    entry = _rounded(value_bytes) if bounded.array else entry_bytes(bounded.key_bytes, value_bytes)
    return bounded.times * entry


def bytes_per(bound: str) -> int:
    """Kernel bytes per unit of *bound* (rows.CGROUPS, PROCESSES, THREADS, TIMED), over every table's maps."""
    return sum(map_bytes(table, bounded) for table in TABLES for bounded in table.maps if bounded.bound == bound)


def maps_of(bound: str) -> list[str]:
    """The programs whose maps *bound* sizes, in table order ("syscalls", "sched", ...)."""
    found: list[str] = []
    for table in TABLES:
        if any(bounded.bound == bound for bounded in table.maps) and table.collector not in found:
            found.append(table.collector)
    return found


def _rounded(size: int) -> int:
    return -(-size // 8) * 8
