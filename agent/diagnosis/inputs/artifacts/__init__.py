"""Parsers of the artifacts people already collected before schedwatch was on the machine.

One module per foreign format (``perf trace -s``, ``strace -c``, ``top``, ``pidstat``, ``mpstat``, ``vmstat``),
each turning a pasted text into frozen records (:mod:`.results`); :mod:`.detect`
recognises the format by content. A parser reports what the tool printed and never decides a cause.
"""

from agent.diagnosis.inputs.artifacts.detect import (
    FORMATS,
    Artifact,
    UnknownFormat,
    detect_format,
    parse,
    parse_file,
    read_text,
    unknown_format_message,
)
from agent.diagnosis.inputs.artifacts.errors import ArtifactError, CommandFailed, Malformed, NotThisFormat, Unreadable

__all__ = [
    "FORMATS",
    "Artifact",
    "ArtifactError",
    "CommandFailed",
    "Malformed",
    "NotThisFormat",
    "UnknownFormat",
    "Unreadable",
    "detect_format",
    "parse",
    "parse_file",
    "read_text",
    "unknown_format_message",
]
