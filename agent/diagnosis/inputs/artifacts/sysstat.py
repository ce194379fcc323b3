"""What sysstat's reports (pidstat, mpstat) share: the system line, the time or ``Average:`` before each row, and
the reading of tables whose rows are named by the column header above them (:class:`Tool`).

A row starts with a time (``01:15:03``, ``01:15:03 PM`` in 12-hour locales, ``14时05分26秒`` in Chinese), or with the
word the locale uses for the averages (``Average:``, ``Durchschn.:``, ``Moyenne :``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar

from agent.diagnosis.inputs.artifacts.damage import Damage, read_rows
from agent.diagnosis.inputs.artifacts.errors import Malformed
from agent.diagnosis.inputs.artifacts.opening import is_error_message, report_lines
from agent.diagnosis.inputs.artifacts.text import Line, lines, trimmed

R = TypeVar("R")


class Averaged(Protocol):
    """A row of a sysstat table: an ``Average:`` row or one interval's."""

    @property
    def average(self) -> bool: ...


A = TypeVar("A", bound=Averaged)

_SYSTEM = re.compile(
    r"Linux (?P<kernel>\S+) \((?P<host>[^)]*)\) +(?P<date>\S+) +(?P<arch>\S+)(?: +\((?P<cpus>\d+) CPU\))?"
)
_TIME = re.compile(r"(?P<h>\d{1,2})(?::|时)(?P<m>\d\d)(?::|分)(?P<s>\d\d)秒?")  # 14:05:26, or 14时05分26秒 (zh_CN)
_MERIDIEM = ("AM", "PM")


@dataclass(frozen=True)
class SystemLine:
    """The first line of sysstat's tools: ``Linux 6.18.44 (vm)  12/01/2026  _x86_64_  (2 CPU)``."""

    kernel: str
    host: str
    date: str
    arch: str
    cpus: int | None


@dataclass(frozen=True)
class Report(Generic[A]):
    """A sysstat tool's report: its system line, every row of every table in the order printed, the rows read past."""

    system: SystemLine | None
    rows: tuple[A, ...]
    damage: tuple[Damage, ...] = ()  # rows cut or garbled: skipped, each named

    def averages(self) -> tuple[A, ...]:
        """The ``Average:`` rows (printed when the tool was given a count)."""
        return tuple(row for row in self.rows if row.average)


class Stamp(NamedTuple):
    """The prefix of a sysstat row: 24-hour time (None on averages), whether it is an average, fields it used."""

    time: str | None
    average: bool
    width: int


def system_line(line: Line) -> SystemLine | None:
    """``Linux 6.18.44 (vm)  12/01/2026  _x86_64_  (2 CPU)`` -> SystemLine; None for any other line."""
    match = _SYSTEM.fullmatch(line.text.strip())
    if match is None:
        return None
    cpus = match.group("cpus")
    return SystemLine(match["kernel"], match["host"], match["date"], match["arch"], int(cpus) if cpus else None)


def stamp(fields: list[str]) -> Stamp | None:
    """The time or average label at the start of *fields*; None when the row starts with neither."""
    if not fields:
        return None
    if time := _TIME.fullmatch(fields[0]):
        hour = int(time["h"])
        if len(fields) > 1 and fields[1].upper() in _MERIDIEM:
            hour = hour % 12 + (12 if fields[1].upper() == "PM" else 0)
            return Stamp(f"{hour:02d}:{time['m']}:{time['s']}", False, 2)
        return Stamp(f"{hour:02d}:{time['m']}:{time['s']}", False, 1)
    if fields[0].endswith(":") and fields[0][:-1].replace(".", "").isalpha():
        return Stamp(None, True, 1)
    if len(fields) > 1 and fields[1] == ":" and fields[0].isalpha():  # French: "Moyenne :"
        return Stamp(None, True, 2)
    return None


def is_row(line: Line) -> bool:
    """Whether *line* is a row of a sysstat table (it starts with the time stamp)."""
    return stamp(line.fields) is not None


def stamped(tool: str, line: Line) -> Stamp:
    """The stamp *line* starts with; raises Malformed when it starts with neither a time nor an average label."""
    prefix = stamp(line.fields)
    if prefix is None:
        raise Malformed(tool, line.number, f"a row that starts with neither a time nor 'Average:': {line.text!r}")
    return prefix


def named_fields(tool: str, line: Line, columns: list[str], fields: list[str]) -> dict[str, str]:
    """The *fields* of *line* by the *columns* of its header; raises Malformed when their counts differ."""
    if len(fields) != len(columns):
        raise Malformed(tool, line.number, f"{len(columns)} columns in the header, {len(fields)} in this row")
    return dict(zip(columns, fields, strict=True))


@dataclass(frozen=True)
class Tables(Generic[R]):
    """What a sysstat report holds: its system line, every row of every table in order, the rows read past."""

    system: SystemLine | None
    rows: list[R]
    damage: list[Damage]
    last_line: int  # the number of the report's last line


@dataclass(frozen=True)
class Tool:
    """One sysstat tool's report: its name (the format's too), how its column header is told, what is missing when
    no header is found."""

    name: str
    header_columns: Callable[[Line], list[str] | None]  # the column names of a header line; None for another line
    missing: str

    def is_error(self, line: str) -> bool:
        """True when *line* is the tool's own error or usage message (``mpstat: ...``, ``Usage: mpstat ...``)."""
        return re.match(rf"({self.name}: |Usage: {self.name}\b)", line) is not None

    def looks_like(self, text: str) -> bool:
        """True when *text* holds the tool's column header."""
        return any(self.header_columns(line) for line in lines(text))

    def looks_like_error(self, text: str) -> bool:
        """True when *text* is the tool's own error or usage message and holds no table."""
        return is_error_message(text, self.looks_like, self.is_error)

    def tables(self, text: str, row: Callable[[Line, list[str]], R]) -> Tables[R]:
        """Every row of *text* read by *row* with the columns of the header above it; a malformed row is skipped and
        named. Raises NotThisFormat, CommandFailed, or Malformed for a row before any header (see .errors)."""
        report = report_lines(text, self.name, self.looks_like, self.is_error, self.missing)
        system: SystemLine | None = None
        columns: list[str] | None = None
        found: list[R] = []
        damage: list[Damage] = []
        for line in trimmed(report, self._opens_report, is_row):
            if (said := system_line(line)) is not None:
                system = said
            elif (names := self.header_columns(line)) is not None:
                columns = names
            elif columns is None:
                raise Malformed(self.name, line.number, f"a row before any column header: {line.text.strip()!r}")
            else:
                found.extend(read_rows([(line, columns)], lambda under: row(*under), damage))
        return Tables(system, found, damage, report[-1].number)

    def _opens_report(self, line: Line) -> bool:
        return system_line(line) is not None or self.header_columns(line) is not None
