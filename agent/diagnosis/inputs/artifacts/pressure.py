"""Pressure stall information: ``/proc/pressure/{cpu,memory,io}`` and a cgroup's ``cpu.pressure`` /
``memory.pressure`` / ``io.pressure``, pasted after ``$ cat FILE`` prompts, as ``grep -n`` prints them
(``/proc/pressure/io:2:full ...``), or bare. From a public pull request (flatcar-archive/coreos-overlay#638)::

    $ cat /proc/pressure/cpu
    some avg10=0.13 avg60=0.68 avg300=0.28 total=1195993
    $ cat /proc/pressure/io
    some avg10=0.00 avg60=1.11 avg300=0.68 total=2828208
    full avg10=0.00 avg60=0.91 avg300=0.56 total=2334731

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> [(line.resource, line.kind, line.avg10, line.total) for line in report.lines]
[('cpu', 'some', 0.13, 1195993), ('io', 'some', 0.0, 2828208), ('io', 'full', 0.0, 2334731)]

A line whose file the paste does not name has resource None. Facts (:func:`to_facts`): the node's (or, for a
cgroup's file, the workload's) waiting and stalled seconds by resource (``total=`` is microseconds since boot or
since the cgroup was made: totals, not rates), and the ten-second averages in the notes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.damage import read_past
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import decimal, lines, unquoted

__all__ = ["FORMAT", "PressureLine", "PressureReport", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "pressure"

_LINE = re.compile(
    r"^(?:(?P<file>\S*?(?:pressure/(?P<proc>cpu|memory|io)|(?P<cgroup>cpu|memory|io)\.pressure)):\d+:)?"
    r"(?P<kind>some|full) avg10=(?P<avg10>[\d.,]+) avg60=(?P<avg60>[\d.,]+) avg300=(?P<avg300>[\d.,]+) "
    r"total=(?P<total>\d+)$"
)
_CAT = re.compile(
    r"(?:^|\s)cat\s+(?P<file>\S*(?:pressure/(?P<proc>cpu|memory|io)|(?P<cgroup>cpu|memory|io)\.pressure))"
)


@dataclass(frozen=True)
class PressureLine:
    """One ``some`` or ``full`` line and the resource of its file."""

    resource: str | None  # cpu, memory, io; None when the paste does not say
    kind: str  # some, full
    avg10: float
    avg60: float
    avg300: float
    total: int  # microseconds
    cgroup: bool  # a cgroup's file (the workload's), not /proc/pressure (the node's)


@dataclass(frozen=True)
class PressureReport:
    """The pressure lines of a paste, and the other lines read past."""

    lines: tuple[PressureLine, ...]
    skipped: int


def looks_like(text: str) -> bool:
    """True when *text* holds a ``some avg10=... total=...`` line."""
    return any(_LINE.match(unquoted(line.text)) for line in lines(text))


def looks_like_error(text: str) -> bool:
    """``cat: /proc/pressure/cpu: No such file or directory`` (a kernel without PSI)."""
    first = next((unquoted(line.text) for line in lines(text) if line.text.strip()), "")
    return bool(re.match(r"^cat: \S*pressure\S*: ", first)) and not looks_like(text)


def parse(text: str) -> PressureReport:
    """The pressure lines in *text*; raises NotThisFormat (see .errors)."""
    found: list[PressureLine] = []
    resource: str | None = None
    cgroup = False
    skipped = 0
    for line in lines(text):
        clean = unquoted(line.text)
        if not clean:
            continue
        if (cat := _CAT.search(clean)) is not None:
            resource, cgroup = cat["proc"] or cat["cgroup"], cat["cgroup"] is not None
            continue
        match = _LINE.match(clean)
        if match is None:
            skipped += 1
            continue
        if match["file"]:
            resource, cgroup = match["proc"] or match["cgroup"], match["cgroup"] is not None
        found.append(
            PressureLine(
                resource,
                match["kind"],
                decimal(match["avg10"]),
                decimal(match["avg60"]),
                decimal(match["avg300"]),
                int(match["total"]),
                cgroup,
            )
        )
    if not found:
        raise NotThisFormat(FORMAT, "no `some avg10=... total=...` line")
    return PressureReport(tuple(found), skipped)


def to_facts(report: PressureReport, source: str) -> Part:
    """Waiting ("some") and stalled ("full") seconds by resource: the node's, or the workload's for a cgroup."""
    waiting: dict[str, float] = {}
    stalled: dict[str, float] = {}
    unnamed = 0
    for line in report.lines:
        if line.resource is None:
            unnamed += 1
            continue
        (waiting if line.kind == "some" else stalled)[line.resource] = line.total / 1e6
    averages = ", ".join(
        f"{line.resource or '?'} {line.kind} {line.avg10:g} %" for line in report.lines if line.avg10 > 0
    )
    notes = [
        "pressure totals count since boot (or since the cgroup was made): how much, not how recent; "
        f"ten-second averages: {averages or 'all 0'}"
    ]
    notes += read_past(
        source,
        (unnamed, "pressure line(s) without their file's name: resource unknown, left out"),
        (report.skipped, "lines that are not pressure lines skipped"),
    )
    own = bool(report.lines) and all(line.cgroup for line in report.lines if line.resource)
    if own and (waiting or stalled):
        workload = WorkloadView(
            ref=Workload(), pressure_waiting_seconds=waiting or None, pressure_stalled_seconds=stalled or None
        )
        return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
    node = NodeView(pressure_waiting_seconds=waiting or None, pressure_stalled_seconds=stalled or None)
    return Part(FORMAT, source, node, notes=tuple(notes))
