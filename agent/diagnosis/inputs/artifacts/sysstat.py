"""What sysstat's reports (pidstat, mpstat) share: the system line, and the time or ``Average:`` before each row.

A row starts with a time (``01:15:03``, ``01:15:03 PM`` in 12-hour locales, ``14时05分26秒`` in Chinese), or with the
word the locale uses for the averages (``Average:``, ``Durchschn.:``, ``Moyenne :``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from agent.diagnosis.inputs.artifacts.text import Line

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
