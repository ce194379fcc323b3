"""``vmstat`` reports (``vmstat 1 5``; also ``-w`` wide, ``-t`` with a timestamp, ``-a`` active/inactive memory).

Columns are read by position, since locales translate the memory columns' names (``frei``, ``Cache``) while
the order stays: r b, four memory columns, si so, bi bo, in cs, us sy id wa st, and ``gu`` (guest) in
procps-ng 4. The first row covers the time since boot. Repeated headers (long runs) are skipped. A sample
recorded on this project's sick workload (procps-ng 4.0, ``vmstat 1 5``, rows cut here)::

    procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu-----
     r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st
    10  0      0 17117596 176624 6601300    0    0  1034  5324 1061 3832 40  7 53  0  0
    12  0      0 17117596 176624 6601300    0    0     0   568 1646 183110 80 20  0  0  0

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> rows = parse(docstring_sample(__doc__)).rows
>>> [(row.since_boot, row.r, row.cs, row.us, row.sy) for row in rows]
[(True, 10, 3832, 40, 7), (False, 12, 183110, 80, 20)]

Facts (:func:`to_facts`): node facts only, since vmstat is machine-wide (every process on the host is in it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

from agent.diagnosis.facts import CpuShares, NodeView
from agent.diagnosis.inputs.artifacts import table
from agent.diagnosis.inputs.artifacts.damage import Damage, read_rows
from agent.diagnosis.inputs.artifacts.damage import notes as damage_notes
from agent.diagnosis.inputs.artifacts.errors import Malformed
from agent.diagnosis.inputs.artifacts.known import mean_known
from agent.diagnosis.inputs.artifacts.opening import is_error_message, report_lines
from agent.diagnosis.inputs.artifacts.part import MACHINE_WIDE, Part
from agent.diagnosis.inputs.artifacts.text import Line, lines, trimmed

__all__ = ["FORMAT", "VmstatReport", "VmstatRow", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "vmstat"


# --- the records: what the tool printed, nothing inferred -----------------------------------------


@dataclass(frozen=True)
class VmstatRow:
    """One line of ``vmstat``: run queue, blocked, interrupts and context switches per second, CPU shares.

    The first line vmstat prints averages since boot (*since_boot*); the others cover one interval each.
    """

    since_boot: bool
    r: int
    b: int
    interrupts: int
    cs: int
    us: int
    sy: int
    id: int
    wa: int
    st: int | None
    gu: int | None  # guest time, procps-ng 4 and newer
    timestamp: str | None  # vmstat -t


@dataclass(frozen=True)
class VmstatReport:
    """A ``vmstat`` report."""

    rows: tuple[VmstatRow, ...]
    damage: tuple[Damage, ...] = ()  # rows cut or garbled: skipped, each named


# --- recognising and parsing ----------------------------------------------------------------------

_GROUPS = re.compile(r"-*procs-* +-")  # "procs -----------memory---------- ---swap-- ..."
_ERROR = re.compile(r"vmstat: (?P<message>.+)")
_CORE = 17  # r b, 4 memory, si so, bi bo, in cs, us sy id wa st


def _is_header(line: Line) -> bool:
    fields = line.fields
    return len(fields) >= 16 and fields[:2] == ["r", "b"]


def _opens_report(line: Line) -> bool:
    return _GROUPS.match(line.text.strip()) is not None or _is_header(line)


def _is_row(line: Line) -> bool:
    return line.text.lstrip()[:1].isdigit()


_MISSING = "no 'procs ---memory---' line and no 'r b swpd ...' header"


def looks_like(text: str) -> bool:
    """True when *text* holds vmstat's ``procs ---memory---`` line or its ``r b swpd ...`` header."""
    return any(_GROUPS.match(line.text.strip()) or _is_header(line) for line in lines(text))


def looks_like_error(text: str) -> bool:
    """True when *text* is vmstat's own error message."""
    return is_error_message(text, looks_like, _is_error)


def _is_error(line: str) -> bool:
    return _ERROR.fullmatch(line) is not None


def parse(text: str) -> VmstatReport:
    """Every row in *text*; raises NotThisFormat, CommandFailed or Malformed (see .errors)."""
    rows = report_lines(text, FORMAT, looks_like, _is_error, _MISSING)
    header: list[str] | None = None
    result: list[VmstatRow] = []
    damage: list[Damage] = []
    for line in trimmed(rows, _opens_report, _is_row):
        if _GROUPS.match(line.text.strip()):
            continue
        if _is_header(line):
            header = line.fields
            if len(header) < _CORE:
                raise Malformed(
                    FORMAT, line.number, f"vmstat prints at least {_CORE} columns, this header {len(header)}"
                )
            continue
        if header is None:
            raise Malformed(FORMAT, line.number, f"a row before the 'r b ...' header: {line.text.strip()!r}")
        result.extend(read_rows([line], partial(_row, header=header, since_boot=not result), damage))
    if not result:  # vmstat prints its since-boot line at once; a report without it was cut short
        raise Malformed(FORMAT, rows[-1].number, "no vmstat rows under the header (cut short?)")
    return VmstatReport(tuple(result), tuple(damage))


def _row(line: Line, header: list[str], since_boot: bool) -> VmstatRow:
    fields = line.fields
    guest = len(header) > _CORE and header[_CORE] == "gu"
    numbers = _CORE + (1 if guest else 0)
    stamped = len(header) == numbers + 1  # -t: one header word (the time zone), two fields (date, time)
    expected = numbers + (2 if stamped else 0)
    if len(fields) != expected:
        raise Malformed(FORMAT, line.number, f"{expected} fields expected, {len(fields)} found: {line.text.strip()!r}")
    values = [table.whole(FORMAT, line, header[i], fields[i]) for i in range(numbers)]
    return VmstatRow(
        since_boot=since_boot,
        r=values[0],
        b=values[1],
        interrupts=values[10],
        cs=values[11],
        us=values[12],
        sy=values[13],
        id=values[14],
        wa=values[15],
        st=values[16],
        gu=values[17] if guest else None,
        timestamp=" ".join(fields[numbers:]) if stamped else None,
    )


# --- facts: what the records tell the rules -------------------------------------------------------


def to_facts(report: VmstatReport, source: str) -> Part:
    """Run queue, context switches and CPU shares: the mean of the intervals (the first line is since boot)."""
    rows = [row for row in report.rows if not row.since_boot]
    notes = [MACHINE_WIDE.format(tool=FORMAT)]
    if not rows:
        rows = list(report.rows)
        notes.append("vmstat printed only its first line: averages since boot, not the present")
    shares = CpuShares(
        user=mean_known([row.us for row in rows]),
        system=mean_known([row.sy for row in rows]),
        idle=mean_known([row.id for row in rows]),
        iowait=mean_known([row.wa for row in rows]),
        steal=mean_known([row.st for row in rows]),
    )
    node = NodeView(
        cpu=shares,
        run_queue=mean_known([row.r for row in rows]),
        context_switches_per_second=mean_known([row.cs for row in rows]),
    )
    return Part(FORMAT, source, node, notes=(*notes, *damage_notes(source, report.damage)))
