"""Files (or directories of files) given on the command line -> the facts of one environment.

Each file is read, its format found in the table (:mod:`.formats`), parsed and converted by that row's functions;
the parts of one environment are merged (:mod:`.merge`). Every failure is one :class:`OfflineError` line that
names the file and says what to do.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from agent.diagnosis.facts import Facts
from agent.diagnosis.inputs.artifacts import formats
from agent.diagnosis.inputs.artifacts.errors import ArtifactError, Unreadable
from agent.diagnosis.inputs.artifacts.merge import merge
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import decode

MAX_BYTES = 64 * 1024 * 1024  # perf trace -s of 100,000 threads is about 60 MB; a larger file is not a summary
STDIN = Path("-")  # a file named "-" on the command line is standard input, as for cat and grep
STDIN_NAME = "stdin"


class OfflineError(Exception):
    """A file cannot be used; the message is the one line a user sees, naming the file and what to do."""


def read_text(path: Path) -> str:
    """The text saved in *path* (decoded as :func:`.text.decode` does); raises Unreadable naming the file."""
    try:
        if path == STDIN:
            raw = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with path.open("rb") as file:
                raw = file.read(MAX_BYTES + 1)
    except OSError as error:
        raise Unreadable(f"{path}: cannot read it ({error.strerror or error})") from None
    if len(raw) > MAX_BYTES:
        raise Unreadable(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB; give the summary, not the full trace")
    return decode(raw)


def parse_file(path: Path) -> object:
    """The records saved in *path*; raises Unreadable, UnknownFormat, CommandFailed or Malformed naming the file."""
    return formats.parse(read_text(path), source=str(path))


def files_of(paths: Sequence[Path]) -> list[Path]:
    """*paths* with each directory replaced by its files (sorted, hidden ones skipped, not recursive)."""
    found: list[Path] = []
    if list(paths).count(STDIN) > 1:
        raise OfflineError("standard input (-) can be read once: give - once, the rest as files")
    for path in paths:
        if path != STDIN and path.is_dir():
            inside = sorted(child for child in path.iterdir() if child.is_file() and not child.name.startswith("."))
            if not inside:
                raise OfflineError(f"{path}: an empty directory; give it the saved outputs of perf, strace, top, ...")
            found.extend(inside)
        else:
            found.append(path)
    if not found:
        raise OfflineError("no files given: give the saved outputs of perf trace -s, strace -c, top, ...")
    return found


def read_part(path: Path) -> Part | Facts:
    """One file: the part it tells, or, for a saved schedwatch report, the facts of its whole environment."""
    try:
        text = read_text(path)
        fmt = formats.detect_format(text, source=str(path))
        records = fmt.parse(text)
    except (Unreadable, formats.UnknownFormat) as error:
        raise OfflineError(str(error)) from None  # the message names the file and what to give instead
    except ArtifactError as error:
        raise OfflineError(f"{path}: {error}; {error.advice}") from None
    return fmt.to_facts(records, STDIN_NAME if path == STDIN else path.name)


def _not_read_note(problems: Sequence[str]) -> str:
    """The note that lists the files not read, and the formats that are."""
    known = "; ".join(fmt.command for fmt in formats.FORMATS)
    return f"not read: {' | '.join(problems)} (formats read: {known})"


def read_environment(paths: Sequence[Path]) -> Facts:
    """The facts of one environment from its files: artifacts are merged; a schedwatch report stands alone.

    A file that cannot be read is listed in the notes as not read, and the rest is analysed; when no file can be
    read, OfflineError says why for each (one line).
    """
    read: list[tuple[Path, Part | Facts]] = []
    problems: list[str] = []
    for path in files_of(paths):
        try:
            read.append((path, read_part(path)))
        except OfflineError as error:
            problems.append(str(error))
    if not read:
        raise OfflineError(problems[0] if len(problems) == 1 else "no file could be read: " + " | ".join(problems))
    reports = [(path, item) for path, item in read if isinstance(item, Facts)]
    if reports:
        if len(read) > 1:
            raise OfflineError(
                f"{reports[0][0]}: a schedwatch report is one environment by itself; "
                "give it alone, not with other files"
            )
        facts = reports[0][1]
    else:
        facts = merge([item for _path, item in read if isinstance(item, Part)])
    if problems:
        facts = dataclasses.replace(facts, notes=(*facts.notes, _not_read_note(problems)))
    return facts
