"""``perf lock report`` (a row per kernel lock: acquired, contended, average, total, longest and shortest wait) and
``perf lock contention`` (a row per contended lock or caller: how often, the waits, the lock's type, its caller).
Times carry their unit (``53.61 us``) or are nanoseconds (older perf). A row cut short is skipped and named
(:mod:`.damage`). Recorded here (the fixtures' README), while four threads of tests/workloads/lock_convoy.c queued on
their mutex::

     contended   total wait     max wait     avg wait         type   caller
             1     53.61 us     53.61 us     53.61 us     spinlock   call_timer_fn+0x29

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> [(row.name, row.kind, row.contended, row.total_wait_seconds) for row in report.rows]
[('call_timer_fn+0x29', 'spinlock', 1, 5.361e-05)]

Facts (:func:`to_facts`): a note of the most contended kernel locks. perf lock sees the kernel's locks only: a
program's own mutexes are futex waits (``perf trace -s``, stacks), which the note says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView
from agent.diagnosis.inputs.artifacts.damage import Damage, notes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "LockRow", "PerfLock", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "perf lock"

_CONTENTION_HEADER = re.compile(r"^contended\s+total wait\s+max wait\s+avg wait\s+type\s+caller")
_REPORT_HEADER = re.compile(r"^Name\s+acquired\s+contended\s+avg wait")
_TIME = r"(\d+(?:\.\d+)?)(?:\s*(ns|us|ms|s))?"
_CONTENTION_ROW = re.compile(
    rf"^(?P<contended>\d+)\s+{_TIME}\s+{_TIME}\s+{_TIME}\s+(?P<kind>\S+(?:\s?\S+)?)\s+(?P<caller>\S+)$"
)
_REPORT_ROW = re.compile(
    rf"^(?P<name>\S.*?)\s+(?P<acquired>\d+)\s+(?P<contended>\d+)\s+{_TIME}\s+{_TIME}\s+{_TIME}\s+{_TIME}$"
)
_UNITS = {None: 1e-9, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class LockRow:
    """One lock (report) or caller (contention): how often it was contended and the time waited on it."""

    name: str
    kind: str | None  # spinlock, mutex, rwsem:R, ...; None in the report
    contended: int
    total_wait_seconds: float
    max_wait_seconds: float


@dataclass(frozen=True)
class PerfLock:
    """The rows of one report, which kind, and the damage read past."""

    kind: str  # "contention" or "report"
    rows: tuple[LockRow, ...]
    damage: tuple[Damage, ...]


def _rows(text: str) -> list[tuple[int, str]]:
    return [(line.number, " ".join(unquoted(line.text).split())) for line in lines(text)]


def looks_like(text: str) -> bool:
    """True when *text* has perf lock's header (``contended total wait ...`` or ``Name acquired contended ...``)."""
    return any(_CONTENTION_HEADER.match(row) or _REPORT_HEADER.match(row) for _n, row in _rows(text))


def looks_like_error(text: str) -> bool:
    """perf's failure to find its data file."""
    first = next((row for _n, row in _rows(text) if row), "")
    return first.startswith("failed to open perf.data") and "perf lock" in text and not looks_like(text)


def _seconds(value: str, unit: str | None) -> float:
    return float(value) * _UNITS[unit]


def parse(text: str) -> PerfLock:
    """The rows in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `contended total wait max wait avg wait type caller` header of perf lock")
    rows = _rows(text)
    kind = "contention" if any(_CONTENTION_HEADER.match(row) for _n, row in rows) else "report"
    found: list[LockRow] = []
    damage: list[Damage] = []
    started = False
    for number, row in rows:
        if _CONTENTION_HEADER.match(row) or _REPORT_HEADER.match(row):
            started = True
            continue
        if not started or not row:
            continue
        if kind == "contention" and (match := _CONTENTION_ROW.match(row)) is not None:
            groups = match.groups()
            found.append(LockRow(match["caller"], match["kind"], int(match["contended"]),
                                 _seconds(groups[1], groups[2]), _seconds(groups[3], groups[4])))  # fmt: skip
        elif kind == "report" and (match := _REPORT_ROW.match(row)) is not None:
            groups = match.groups()
            found.append(LockRow(match["name"], None, int(match["contended"]),
                                 _seconds(groups[5], groups[6]), _seconds(groups[7], groups[8])))  # fmt: skip
        else:
            damage.append(Damage(number, f"a row that is not a lock's, skipped ({row[:40]!r})"))
    return PerfLock(kind, tuple(found), tuple(damage))


def to_facts(report: PerfLock, source: str) -> Part:
    """A note of the most contended kernel locks, and what perf lock cannot see."""
    busiest = sorted(report.rows, key=lambda row: -row.total_wait_seconds)[:3]
    shown = ", ".join(
        f"{row.name}{f' ({row.kind})' if row.kind else ''} {row.contended} times, {row.total_wait_seconds:.3g} s"
        for row in busiest
    )
    said = (
        f"{source}: perf lock {report.kind}: {len(report.rows)} kernel locks contended"
        + (f" (most waited on: {shown})" if shown else "")
        + "; kernel locks only: a program's own mutexes are futex waits (perf trace -s -p PID, or its stacks)",
    )
    return Part(FORMAT, source, NodeView(), notes=(*said, *notes(source, report.damage)))
