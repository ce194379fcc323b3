"""Which tool printed a text, decided by its content (never by the file's name), and the parse that follows.

Each format's module says whether a text looks like its report (:func:`looks_like`) or like its own error
message (``looks_like_error``); the first format that claims the text parses it. A text no format claims gets
:class:`UnknownFormat`, whose message (:func:`unknown_format_message`) names every format known.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.diagnosis.inputs.artifacts import mpstat, perf_trace, pidstat, strace, top, vmstat
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat, Unreadable
from agent.diagnosis.inputs.artifacts.results import (
    MpstatReport,
    PerfTraceSummary,
    PidstatReport,
    StraceSummary,
    TopReport,
    VmstatReport,
)
from agent.diagnosis.inputs.artifacts.text import decode

MAX_BYTES = 64 * 1024 * 1024  # perf trace -s of 100,000 threads is about 60 MB; a larger file is not a summary

Artifact = PerfTraceSummary | StraceSummary | TopReport | PidstatReport | MpstatReport | VmstatReport


@dataclass(frozen=True)
class Format:
    """One known format: its name, the command that makes it, and its module's functions."""

    name: str
    command: str
    looks_like: Callable[[str], bool]
    looks_like_error: Callable[[str], bool]
    parse: Callable[[str], Artifact]


# Order matters only for texts two formats could claim: a table's header names make each one distinct.
FORMATS: tuple[Format, ...] = (
    Format(perf_trace.FORMAT, "perf trace -s", perf_trace.looks_like, perf_trace.looks_like_error, perf_trace.parse),
    Format(strace.FORMAT, "strace -c (-f, -w)", strace.looks_like, strace.looks_like_error, strace.parse),
    Format(top.FORMAT, "top -b (-H), or a top screen", top.looks_like, top.looks_like_error, top.parse),
    Format(pidstat.FORMAT, "pidstat -t", pidstat.looks_like, pidstat.looks_like_error, pidstat.parse),
    Format(mpstat.FORMAT, "mpstat -P ALL", mpstat.looks_like, mpstat.looks_like_error, mpstat.parse),
    Format(vmstat.FORMAT, "vmstat", vmstat.looks_like, vmstat.looks_like_error, vmstat.parse),
)


class UnknownFormat(NotThisFormat):
    """No known format claims the text."""

    def __init__(self, source: str | None = None) -> None:
        super().__init__("a known tool's", "no known format matches")
        self.args = (unknown_format_message(source),)  # the one line a user sees


def unknown_format_message(source: str | None = None) -> str:
    """One line: *source* (a file name, when given) is in no known format, and which formats are known."""
    known = "; ".join(fmt.command for fmt in FORMATS)
    where = f"{source}: " if source else ""
    return f"{where}not output of a tool schedwatch reads; give it the output of one of: {known}"


def detect_format(text: str, source: str | None = None) -> Format:
    """The format of *text*: the first whose report (or, failing that, whose error message) it looks like.

    Raises UnknownFormat (a NotThisFormat) when none does, the empty text included.
    """
    for fmt in FORMATS:
        if fmt.looks_like(text):
            return fmt
    for fmt in FORMATS:
        if fmt.looks_like_error(text):
            return fmt
    raise UnknownFormat(source)


def parse(text: str, source: str | None = None) -> Artifact:
    """*text* parsed by the parser of its format; raises UnknownFormat, CommandFailed or Malformed."""
    return detect_format(text, source).parse(text)


def read_text(path: Path) -> str:
    """The text saved in *path* (decoded as :func:`.text.decode` does); raises Unreadable.

    Error messages name the file.
    """
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_BYTES + 1)
    except OSError as error:
        raise Unreadable(f"{path}: cannot read it ({error.strerror or error})") from None
    if len(raw) > MAX_BYTES:
        raise Unreadable(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB; give the summary, not the full trace")
    return decode(raw)


def parse_file(path: Path) -> Artifact:
    """The artifact saved in *path*; raises Unreadable, UnknownFormat, CommandFailed or Malformed.

    Error messages name the file.
    """
    return parse(read_text(path), source=str(path))
