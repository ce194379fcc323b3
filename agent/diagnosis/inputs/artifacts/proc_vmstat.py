"""``/proc/vmstat``: the kernel's memory counters, of which the page reclaim and compaction ones are read. One
reading counts since boot; two readings (one pasted after the other) count what happened between them. Older kernels
count by zone (``pgscan_kswapd_normal``): the zones are added up. Prompts, ``sort``/``grep`` command lines and a last
line cut short are read past. From a public thread (collectd/collectd#1307, lines cut here)::

    allocstall 3281736
    compact_fail 6550462
    compact_stall 6559780
    nr_dirty 2229
    nr_free_pages 984150

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (len(report.readings), report.readings[0]["allocstall"], report.readings[0]["compact_stall"])
(1, 3281736, 6559780)

Facts (:func:`to_facts`): ``NodeView.reclaim``: pages scanned and reclaimed by kswapd and by direct reclaim,
allocations stalled in direct reclaim and in compaction, compaction failures; since boot or between the first and
the last reading. A counter not in the paste stays unknown. Reclaim is memory pressure, never thread contention.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, ReclaimCounts
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "ProcVmstat", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "/proc/vmstat"

_LINE = re.compile(r"^(?P<name>[a-z][a-z0-9_]*) (?P<value>\d+)$")
_ZONES = ("dma", "dma32", "normal", "movable", "high", "device")
# memory.stat of a cgroup has some of these counters too, but none of the node's nr_* gauges and these keys of its own
_CGROUP_KEYS = frozenset({"anon", "file", "cache", "rss", "total_rss", "kernel_stack", "hierarchical_memory_limit"})
COUNTERS = {  # ReclaimCounts field -> the counter's name (or, on older kernels, its zones' names after it)
    "scanned_kswapd": "pgscan_kswapd",
    "scanned_direct": "pgscan_direct",
    "stolen_kswapd": "pgsteal_kswapd",
    "stolen_direct": "pgsteal_direct",
    "allocation_stalls": "allocstall",
    "compaction_stalls": "compact_stall",
    "compaction_failures": "compact_fail",
}


@dataclass(frozen=True)
class ProcVmstat:
    """The readings in a paste (each counter by name) and the lines read past."""

    readings: tuple[dict[str, int], ...]
    skipped: int


def _pairs(text: str) -> list[tuple[str, int] | None]:
    found: list[tuple[str, int] | None] = []
    for line in lines(text):
        row = " ".join(unquoted(line.text).split())
        if not row:
            continue
        match = _LINE.match(row)
        found.append((match["name"], int(match["value"])) if match else None)
    return found


def looks_like(text: str) -> bool:
    """True when *text* is mostly ``name value`` lines with the node's ``nr_*`` gauges and paging counters."""
    pairs = _pairs(text)
    names = {pair[0] for pair in pairs if pair is not None}
    counted = sum(1 for pair in pairs if pair is not None)
    node_keys = any(name.startswith("nr_") for name in names) and bool(
        names & {"pgfault", "pgfree", "pgpgin", "nr_free_pages", "allocstall", "compact_stall"}
        or any(name.startswith(("pgalloc_", "pgscan_", "pgsteal_", "allocstall_")) for name in names)
    )
    return counted >= 5 and counted > len(pairs) - counted and node_keys and not names & _CGROUP_KEYS


# reading /proc/vmstat does not fail in a way its reader prints
looks_like_error = prints_no_error


def parse(text: str) -> ProcVmstat:
    """The readings in *text* (a counter seen again starts the next); raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `nr_free_pages 123` / `pgfault 456` lines")
    readings: list[dict[str, int]] = [{}]
    skipped = 0
    for pair in _pairs(text):
        if pair is None:
            skipped += 1
            continue
        name, value = pair
        if name in readings[-1]:
            readings.append({})
        readings[-1][name] = value
    return ProcVmstat(tuple(readings), skipped)


def _counter(reading: dict[str, int], name: str) -> int | None:
    if name in reading:
        return reading[name]
    zones = [reading[f"{name}_{zone}"] for zone in _ZONES if f"{name}_{zone}" in reading]
    return sum(zones) if zones else None


def to_facts(report: ProcVmstat, source: str) -> Part:
    """Reclaim and compaction: since boot from one reading, else between the first and the last."""
    first, last = report.readings[0], report.readings[-1]
    since_boot = len(report.readings) == 1
    values: dict[str, float | None] = {}
    for field, name in COUNTERS.items():
        after = _counter(last, name)
        if since_boot:
            values[field] = None if after is None else float(after)
        else:
            before = _counter(first, name)
            values[field] = None if after is None or before is None else float(after - before)
    if since_boot:
        notes = [f"{source}: one reading of /proc/vmstat: reclaim counted since boot, not of a window"]
    else:
        notes = [f"{source}: {len(report.readings)} readings of /proc/vmstat: reclaim between the first and last"]
    missing = [name for field, name in COUNTERS.items() if values[field] is None]
    if missing:
        notes.append(f"{source}: not in the paste: {', '.join(missing)}")
    node = NodeView(reclaim=ReclaimCounts(since_boot, **values))
    return Part(FORMAT, source, node, notes=tuple(notes))
