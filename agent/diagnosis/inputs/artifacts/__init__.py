"""Saved artifacts: the outputs people already collected before schedwatch was on the machine, read into the facts
the rules judge (``schedwatch analyze`` and ``compare``).

One module per format (``perf trace -s``, ``strace -c``, ``top``, ``pidstat``, ``mpstat``, ``vmstat``, ``time``,
``perf stat``, ``perf report``/``perf top``, ``perf script``, stacks, folded stacks, bcc and bpftrace output,
``py-spy dump``, ``/proc`` and cgroup files, clock-source lines, a saved ``schedwatch diagnose --json``), each
holding its detector, its parser (text -> frozen records of what the tool printed; a parser never decides a cause)
and its conversion to facts; one table of them (:mod:`.formats`) that detection and conversion both read. Shared
pieces: :mod:`.text` (what pastes do to text), :mod:`.table` (column tables), :mod:`.opening`, :mod:`.sysstat`,
:mod:`.syscalls`, :mod:`.code` and :mod:`.sampled` (profilers' names and counted stacks into code facts),
:mod:`.moment` (a dump of threads at one moment), :mod:`.errors`, :mod:`.known` (sums that keep unknown unknown),
:mod:`.part` and :mod:`.merge` (the files of one environment combined), :mod:`.load` (files -> facts).
"""

from agent.diagnosis.inputs.artifacts.errors import ArtifactError, CommandFailed, Malformed, NotThisFormat, Unreadable
from agent.diagnosis.inputs.artifacts.formats import (
    FORMATS,
    Format,
    UnknownFormat,
    detect_format,
    parse,
    unknown_format_message,
)
from agent.diagnosis.inputs.artifacts.load import OfflineError, parse_file, read_environment, read_text

__all__ = [
    "FORMATS",
    "ArtifactError",
    "CommandFailed",
    "Format",
    "Malformed",
    "NotThisFormat",
    "OfflineError",
    "UnknownFormat",
    "Unreadable",
    "detect_format",
    "parse",
    "parse_file",
    "read_environment",
    "read_text",
    "unknown_format_message",
]
