"""``/proc/softirqs``: soft interrupts by type and CPU. One reading counts since boot; two readings (one pasted after
the other, as ``cat /proc/softirqs; sleep 10; cat /proc/softirqs`` prints them) count what ran between them. Prompts
and a row cut short are read past. Recorded here (see the fixtures' README), rows cut here::

    CPU0       CPU1
              HI:          0          0
           TIMER:      85842     106028
          NET_RX:      34122     239250

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.cpus, report.readings[0]["NET_RX"])
(2, (34122, 239250))

Facts (:func:`to_facts`): the counts per type and CPU (``NodeView.softirqs``), since boot or between the first and
the last reading (its columns are the possible CPUs, so the online ones are not read from it). The rules say which
CPU a device's soft interrupts pile onto; that is interrupt load, never thread contention.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, SoftirqCounts
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "ProcSoftirqs", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "/proc/softirqs"
TYPES = frozenset(
    {"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "BLOCK_IOPOLL", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}
)
_HEADER = re.compile(r"^(?:CPU\d+ ?)+$")
_ROW = re.compile(r"^(?P<name>[A-Z_]+):(?P<counts>(?: \d+)*)$")


@dataclass(frozen=True)
class ProcSoftirqs:
    """The readings in a paste: each the counts per type, one per CPU; what was read past."""

    cpus: int
    readings: tuple[dict[str, tuple[int, ...]], ...]
    skipped: int
    cut: int  # rows with fewer counts than CPUs


def _clean(text: str) -> list[str]:
    return [" ".join(unquoted(line.text).split()) for line in lines(text)]


def looks_like(text: str) -> bool:
    """True when *text* has a ``CPU0 CPU1 ...`` header and rows of soft-interrupt types (``NET_RX: 1 2``)."""
    rows = _clean(text)
    known = sum(1 for row in rows if (match := _ROW.match(row)) and match["name"] in TYPES)
    return any(_HEADER.match(row) for row in rows) and known >= 2


# reading /proc/softirqs does not fail in a way its reader prints
looks_like_error = prints_no_error


def parse(text: str) -> ProcSoftirqs:
    """The readings in *text* (each starts at a ``CPU0 ...`` header); raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `CPU0 CPU1 ...` header with `NET_RX: ...` rows")
    readings: list[dict[str, tuple[int, ...]]] = []
    cpus = 0
    skipped = cut = 0
    for row in _clean(text):
        if not row:
            continue
        if _HEADER.match(row):
            cpus = len(row.split())
            readings.append({})
            continue
        match = _ROW.match(row)
        if not readings or match is None or match["name"] not in TYPES:
            skipped += 1
            continue
        counts = tuple(int(value) for value in match["counts"].split())
        if len(counts) < cpus:
            cut += 1
            continue
        readings[-1][match["name"]] = counts[:cpus]
    complete = tuple(reading for reading in readings if reading)
    if not complete:
        raise NotThisFormat(FORMAT, "a `CPU0 CPU1 ...` header without rows")
    return ProcSoftirqs(cpus, complete, skipped, cut)


def to_facts(report: ProcSoftirqs, source: str) -> Part:
    """The soft interrupts per type and CPU: since boot from one reading, else between the first and the last."""
    first, last = report.readings[0], report.readings[-1]
    since_boot = len(report.readings) == 1
    if since_boot:
        counts = {name: tuple(float(value) for value in values) for name, values in last.items()}
        notes = [f"{source}: one reading of /proc/softirqs: counts since boot"]
    else:
        counts = {
            name: tuple(float(after - before) for before, after in zip(first[name], values, strict=True))
            for name, values in last.items()
            if name in first
        }
        notes = [f"{source}: {len(report.readings)} readings of /proc/softirqs: what ran between the first and last"]
    if report.cut:
        notes.append(f"{source}: {report.cut} row(s) cut short were skipped")
    node = NodeView(softirqs=SoftirqCounts(since_boot, counts))  # its columns are the possible CPUs, not online
    return Part(FORMAT, source, node, notes=tuple(notes))
