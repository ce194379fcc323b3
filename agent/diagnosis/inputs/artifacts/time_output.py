"""``time`` outputs in their shapes: the bash builtin (``real/user/sys``, also ``time -p``), zsh's one-liner
(``... 0.22s user 0.88s system 310% cpu 0.284 total``), BSD/macOS ``/usr/bin/time`` (``6.79 real 2.48 user 2.29
sys``), GNU ``/usr/bin/time`` (the default line and ``-v``, with context switches and page faults) and IPython's
``%time`` (``CPU times: user …, sys: …, total: …`` / ``Wall time: …``). Decimal commas are read as points. A bash
``time`` pasted from a public thread (sharkdp/hyperfine#515)::

    $ time ./julia-generic/bin/julia -O3 example.jl
    1.0

    real	0m0.284s
    user	0m0.222s
    sys	0m0.881s

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.shape, report.real, report.user, report.system)
('bash', 0.284, 0.222, 0.881)

Facts (:func:`to_facts`): the workload's user and system CPU seconds, its window (the wall time), CPUs used (CPU
time / wall time) and system share; with ``-v`` its context switches and page faults. ``time`` cannot say which
system calls or which code: the rules say what to collect next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.errors import Malformed, NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import decimal, lines, meaningful, unquoted

__all__ = ["FORMAT", "TimeReport", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "time"


@dataclass(frozen=True)
class TimeReport:
    """What one ``time`` printed: seconds (None where the shape does not print it) and, with ``-v``, counts."""

    shape: str  # "bash", "zsh", "bsd", "gnu", "gnu -v", "ipython"
    real: float | None
    user: float
    system: float
    voluntary_switches: int | None = None
    involuntary_switches: int | None = None
    page_faults: int | None = None  # minor + major
    skipped: int = 0  # lines that are not time's: the prompt, the command's own output, elisions


_NUMBER = r"\d+(?:[.,]\d*)?"
_START = r"(?<![\d.,])"  # a number starts here, not inside a run of digits: one start per run keeps a search linear
_BASH = re.compile(rf"(?P<key>real|user|sys)\s+(?:(?P<m>\d+)m)?(?P<s>{_NUMBER})s?")
_ZSH = re.compile(
    rf"{_START}(?P<user>{_NUMBER})s user (?P<sys>{_NUMBER})s system (?P<cpu>\d+)% cpu "
    rf"(?:(?P<h>\d+):)?(?:(?P<m>\d+):)?(?P<total>{_NUMBER}) total$"
)
_BSD = re.compile(rf"{_START}(?P<real>{_NUMBER}) real\s+(?P<user>{_NUMBER}) user\s+(?P<sys>{_NUMBER}) sys$")
_GNU = re.compile(
    rf"{_START}(?P<user>{_NUMBER})user (?P<sys>{_NUMBER})system "
    rf"(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>{_NUMBER})elapsed \d+%CPU"
)
_IPY_CPU = re.compile(r"^CPU times: user (?P<user>[^,]+), sys: (?P<sys>[^,]+), total: (?P<total>[^,]+)")
_IPY_WALL = re.compile(r"^Wall time: (?P<wall>.+)")
_IPY_PART = re.compile(rf"(?P<value>{_NUMBER}) ?(?P<unit>h|min|s|ms|µs|us|ns)")
_UNITS = {"h": 3600.0, "min": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}


def _texts(text: str) -> list[tuple[int, str]]:
    return [(line.number, unquoted(line.text)) for line in meaningful(lines(text))]


# The shapes one line gives away, the first that matches; bash's takes its user and sys lines together (below).
_SHAPE_LINES = (
    ("zsh", _ZSH),
    ("bsd", _BSD),
    ("gnu", _GNU),
    ("gnu -v", re.compile(r"^System time \(seconds\):")),
    ("ipython", _IPY_CPU),
)


def _shape(text: str) -> str | None:
    keys = set()
    for _number, line in _texts(text):
        shape = next((shape for shape, pattern in _SHAPE_LINES if pattern.search(line)), None)
        if shape is not None:
            return shape
        match = _BASH.fullmatch(line)
        if match:
            keys.add(match["key"])
    return "bash" if {"user", "sys"} <= keys else None


def looks_like(text: str) -> bool:
    """True when *text* holds a ``time`` report in one of its shapes."""
    return _shape(text) is not None


# `time` prints no error of its own (the timed command's errors are the command's)
looks_like_error = prints_no_error


def _seconds(token: str) -> float:
    return decimal(token)


def _ipython(value: str, number: int) -> float:
    parts = _IPY_PART.findall(value)
    if not parts:
        raise Malformed(FORMAT, number, f"not an IPython duration: {value!r}")
    return sum(decimal(amount) * _UNITS[unit] for amount, unit in parts)


def _clock(hours: str | None, minutes: str | None, seconds: str) -> float:
    return int(hours or 0) * 3600 + int(minutes or 0) * 60 + decimal(seconds)


def parse(text: str) -> TimeReport:
    """The times in *text*; raises NotThisFormat or Malformed (see .errors)."""
    shape = _shape(text)
    if shape is None:
        raise NotThisFormat(FORMAT, "no real/user/sys lines, zsh, GNU or IPython time line")
    rows = _texts(text)
    if shape == "bash":
        found: dict[str, float] = {}
        for _number, line in rows:
            match = _BASH.fullmatch(line)
            if match:
                found[match["key"]] = int(match["m"] or 0) * 60 + _seconds(match["s"])
        used = sum(1 for _number, line in rows if _BASH.fullmatch(line))
        return TimeReport(shape, found.get("real"), found["user"], found["sys"], skipped=len(rows) - used)
    if shape in ("zsh", "bsd", "gnu"):
        for _number, line in rows:
            if shape == "zsh" and (zsh := _ZSH.search(line)):
                real = _clock(zsh["h"], zsh["m"], zsh["total"])
                return TimeReport(shape, real, decimal(zsh["user"]), decimal(zsh["sys"]), skipped=len(rows) - 1)
            if shape == "bsd" and (bsd := _BSD.search(line)):
                real = decimal(bsd["real"])
                return TimeReport(shape, real, decimal(bsd["user"]), decimal(bsd["sys"]), skipped=len(rows) - 1)
            if shape == "gnu" and (gnu := _GNU.search(line)):
                real = _clock(gnu["h"], gnu["m"], gnu["s"])
                return TimeReport(shape, real, decimal(gnu["user"]), decimal(gnu["sys"]), skipped=len(rows) - 1)
    if shape == "ipython":
        user = system = None
        wall = None
        for number, line in rows:
            if cpu := _IPY_CPU.search(line):
                user, system = _ipython(cpu["user"], number), _ipython(cpu["sys"], number)
            elif wall_match := _IPY_WALL.search(line):
                wall = _ipython(wall_match["wall"], number)
        assert user is not None and system is not None  # the shape says the CPU line is there
        return TimeReport(shape, wall, user, system)
    return _verbose(rows)


def _verbose(rows: list[tuple[int, str]]) -> TimeReport:
    values: dict[str, tuple[int, str]] = {}
    for number, line in rows:
        key, colon, value = line.rpartition(": ")  # keys hold colons too: "Elapsed (wall clock) time (h:mm:ss ..."
        if colon and value and " " not in value:
            values[key] = (number, value)

    def number_of(key: str) -> float | None:
        if key not in values:
            return None
        line, value = values[key]
        try:
            return decimal(value)
        except ValueError:
            raise Malformed(FORMAT, line, f"{key}: not a number: {value!r}") from None

    user, system = number_of("User time (seconds)"), number_of("System time (seconds)")
    if user is None or system is None:
        raise Malformed(FORMAT, rows[-1][0], "GNU time -v without its User time and System time lines (cut short?)")
    real = None
    if "Elapsed (wall clock) time (h:mm:ss or m:ss)" in values:
        clock = values["Elapsed (wall clock) time (h:mm:ss or m:ss)"][1].split(":")
        real = _clock(clock[-3] if len(clock) == 3 else None, clock[-2] if len(clock) >= 2 else None, clock[-1])
    minor, major = number_of("Minor (reclaiming a frame) page faults"), number_of("Major (requiring I/O) page faults")
    voluntary, involuntary = number_of("Voluntary context switches"), number_of("Involuntary context switches")
    return TimeReport(
        "gnu -v",
        real,
        user,
        system,
        voluntary_switches=None if voluntary is None else int(voluntary),
        involuntary_switches=None if involuntary is None else int(involuntary),
        page_faults=None if minor is None or major is None else int(minor + major),
    )


def to_facts(report: TimeReport, source: str) -> Part:
    """The workload's CPU seconds by mode, its window, CPUs used and system share; -v adds switches and faults."""
    cpu = report.user + report.system
    used = cpu / report.real if report.real else None
    notes = [
        "time tells CPU seconds by mode only: not which system calls, which code, or the waits behind the wall time"
    ]
    if report.skipped:
        notes.append(f"{source}: {report.skipped} lines that are not time's (prompt, program output) were skipped")
    if report.real is None:
        notes.append("this time output has no wall (real) time: CPUs used is unknown")
    workload = WorkloadView(
        ref=Workload(),
        seconds=report.real,
        user_seconds=report.user,
        system_seconds=report.system,
        cpu_used_cores=used,
        system_share=report.system / cpu if cpu > 0 else None,
        voluntary_switches=report.voluntary_switches,
        involuntary_switches=report.involuntary_switches,
        page_faults=report.page_faults,
    )
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
