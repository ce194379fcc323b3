"""``py-spy top``: a screen of the Python functions a process spends its time in (``%Own %Total OwnTime TotalTime
Function (filename:line)``), with the samples taken, the GIL's share, how many threads were active and how many
there are. A row cut short is skipped and named (:mod:`.damage`); of several screens pasted one after the other the
last is read. From a public thread (benfred/py-spy#737, rows cut here)::

    Total Samples 1502
    GIL: 59.48%, Active: 1396.41%, Threads: 111

      %Own   %Total  OwnTime  TotalTime  Function (filename)
    1048.90% 1048.90%   149.1s    149.1s   acquire (logging/__init__.py)
    109.38% 109.38%   17.86s    17.86s   read (ssl.py)

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> screen = parse(docstring_sample(__doc__))
>>> (screen.samples, screen.threads, screen.rows[0].function, screen.rows[0].file, screen.rows[0].own_seconds)
(1502, 111, 'acquire', 'logging/__init__.py', 149.1)

Facts (:func:`to_facts`): the functions' own time as on-CPU samples (``cpu_samples``, in seconds: py-spy counts
idle threads' frames too unless it can tell them idle), the threads, and each function through the stack
classifier as a one-frame stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import CodeShare, NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, stack_classes
from agent.diagnosis.inputs.artifacts.damage import Damage, notes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "PySpyTop", "TopRow", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "py-spy top"

_HEADER = re.compile(r"^%Own\s+%Total\s+OwnTime\s+TotalTime\s+Function")
_STATS = re.compile(r"^GIL:\s*(?P<gil>[\d.]+)%,\s*Active:\s*(?P<active>[\d.]+)%,\s*Threads:\s*(?P<threads>\d+)")
_SAMPLES = re.compile(r"^Total Samples\s+(?P<samples>\d+)")
_TIME = r"(?P<{0}>\d+(?:\.\d+)?)(?P<{0}_unit>ms|s|m|h)"
_ROW = re.compile(
    r"^(?P<own>\d+(?:\.\d+)?)%\s+(?P<total>\d+(?:\.\d+)?)%\s+" + _TIME.format("own_time") + r"\s+"
    + _TIME.format("total_time") + r"\s+(?P<function>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$"
)  # fmt: skip
_NUMBERS = re.compile(r"^\d+(?:\.\d+)?%")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class TopRow:
    """One function: its share now (own, with callees), its own and total time so far."""

    own_percent: float
    total_percent: float
    own_seconds: float
    total_seconds: float
    function: str
    file: str


@dataclass(frozen=True)
class PySpyTop:
    """The last screen: samples, GIL and active shares, threads, rows; the damage read past."""

    samples: int | None
    gil_percent: float | None
    active_percent: float | None
    threads: int | None
    rows: tuple[TopRow, ...]
    screens: int
    damage: tuple[Damage, ...]


def _rows(text: str) -> list[tuple[int, str]]:
    return [(line.number, " ".join(unquoted(line.text).split())) for line in lines(text)]


def looks_like(text: str) -> bool:
    """True when *text* has py-spy top's header (``%Own %Total OwnTime TotalTime Function``)."""
    return any(_HEADER.match(row) for _n, row in _rows(text))


def looks_like_error(text: str) -> bool:
    """py-spy's failures to read a process."""
    first = next((row for _n, row in _rows(text) if row), "")
    return first.startswith(("Error: Failed to find python version", "Error: Permission Denied")) and not looks_like(
        text
    )


def _seconds(found: re.Match[str], name: str) -> float:
    return float(found[name]) * _UNITS[found[f"{name}_unit"]]


def parse(text: str) -> PySpyTop:
    """The last screen in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `%Own %Total OwnTime TotalTime Function` header of py-spy top")
    samples = threads = None
    gil = active = None
    rows: list[TopRow] = []
    damage: list[Damage] = []
    screens = 0
    for number, row in _rows(text):
        if (found := _SAMPLES.match(row)) is not None:
            samples = int(found["samples"])
        elif (stats := _STATS.match(row)) is not None:
            gil, active, threads = float(stats["gil"]), float(stats["active"]), int(stats["threads"])
        elif _HEADER.match(row):
            screens += 1
            rows, damage = [], [item for item in damage if item.line < number]
        elif (match := _ROW.match(row)) is not None:
            rows.append(
                TopRow(float(match["own"]), float(match["total"]), _seconds(match, "own_time"),
                       _seconds(match, "total_time"), match["function"], match["file"])
            )  # fmt: skip
        elif screens and _NUMBERS.match(row):
            damage.append(Damage(number, f"a row cut short, skipped ({row[:40]!r})"))
    return PySpyTop(samples, gil, active, threads, tuple(rows), screens, tuple(damage))


def to_facts(screen: PySpyTop, source: str) -> Part:
    """The functions' own time as samples, the threads, and the functions through the stack classifier."""
    frames = [(Frame(row.function, code.library(row.file), row.file), row.own_seconds) for row in screen.rows]
    samples = tuple(CodeShare(frame.library, frame.function, "user", own) for frame, own in frames if own > 0)
    said = [f"{source}: py-spy top, {len(screen.rows)} functions by their own time (seconds since it started)"]
    if screen.active_percent is not None:
        said.append(
            f"{source}: GIL held in {screen.gil_percent:g} % of the samples, {screen.active_percent:g} % active "
            f"(threads busy at once x 100) of {screen.threads} threads"
        )
    if screen.screens > 1:
        said.append(f"{source}: {screen.screens} screens pasted: the last is read")
    stacks = stack_classes.classify((stack_classes.Counted((frame,), own) for frame, own in frames), "samples")
    workload = WorkloadView(
        ref=Workload(),
        threads=screen.threads,
        cpu_samples=samples or None,
        cpu_samples_total=sum(sample.count for sample in samples) or None,
        stacks=stacks,
    )
    return Part(FORMAT, source, NodeView(), workload=workload, notes=(*said, *notes(source, screen.damage)))
