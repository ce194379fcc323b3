"""Files (or directories of files) given on the command line -> the facts of one environment.

Each file is read, its format found in the table (:mod:`.formats`), parsed and converted by that row's functions;
the parts of one environment are merged (:mod:`.merge`). Every failure is one :class:`OfflineError` line that
names the file and says what to do.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agent.diagnosis.facts import Facts
from agent.diagnosis.inputs.artifacts import formats
from agent.diagnosis.inputs.artifacts.errors import ArtifactError, Unreadable
from agent.diagnosis.inputs.artifacts.merge import merge
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import decode

MAX_BYTES = 64 * 1024 * 1024  # perf trace -s of 100,000 threads is about 60 MB; a larger file is not a summary
SNIFF_BYTES = 8192  # the first block: a NUL byte in it is a binary file (UTF-16 pastes start with a byte-order mark)
FORMATS_DOC = "docs/analyze.md"  # where the formats read are listed, for a summary of many files not read
KINDS = {stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device"}  # fmt: skip
STDIN = Path("-")  # a file named "-" on the command line is standard input, as for cat and grep
STDIN_NAME = "stdin"


class OfflineError(Exception):
    """A file cannot be used; the message is the one line a user sees, naming the file and what to do."""


class NotToolOutput(Unreadable):
    """A file that is no tool's output at all: empty, or binary (refused before it is parsed)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind  # "empty" or "binary"


def read_text(path: Path) -> str:
    """The text saved in *path* (decoded as :func:`.text.decode` does); raises Unreadable naming the file.

    What is not a regular file (a named pipe, a socket, a device) is refused without opening it (a pipe without a
    writer would block); an empty file is said empty, and a binary one (a NUL byte in its first block) is refused
    before the rest is read. ``-`` is standard input (a pipe the user wrote into).
    """
    if path == STDIN:
        try:
            raw = _read(sys.stdin.buffer, path)
        except OSError as error:
            raise Unreadable(f"{path}: cannot read standard input ({error.strerror or error})") from None
        return _text(raw, path)
    try:
        found = path.stat()
    except OSError as error:
        raise Unreadable(f"{path}: cannot read it ({error.strerror or error})") from None
    kind = KINDS.get(stat.S_IFMT(found.st_mode))
    if kind is not None:
        raise Unreadable(f"{path}: {kind}, not a file; save the tool's output to a file and give that")
    if found.st_size > MAX_BYTES:
        raise Unreadable(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB; give the summary, not the full trace")
    try:
        with path.open("rb") as file:
            raw = _read(file, path)
    except OSError as error:
        raise Unreadable(f"{path}: cannot read it ({error.strerror or error})") from None
    return _text(raw, path)


def _read(file: BinaryIO, path: Path) -> bytes:
    """At most MAX_BYTES + 1 bytes of *file*; a binary one is refused after its first block."""
    head = file.read(SNIFF_BYTES)
    if b"\0" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise NotToolOutput(f"{path}: a binary file, not a tool's text output", "binary")
    return head + file.read(MAX_BYTES + 1 - len(head))


def _text(raw: bytes, path: Path) -> str:
    if len(raw) > MAX_BYTES:
        raise Unreadable(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB; give the summary, not the full trace")
    text = decode(raw)
    if not text.strip():
        raise NotToolOutput(f"{path}: empty; save the tool's output into it", "empty")
    return text


def name_of(path: Path) -> str:
    """How a report names the file: its name, or stdin for -."""
    return STDIN_NAME if path == STDIN else path.name


def parse_file(path: Path) -> object:
    """The records saved in *path*; raises Unreadable, UnknownFormat, CommandFailed or Malformed naming the file."""
    return formats.parse(read_text(path), source=str(path))


@dataclass(frozen=True)
class Found:
    """The files found under what was given, and the directories that could not be read."""

    files: list[Path]
    unread_directories: list[str]


def find_files(paths: Sequence[Path]) -> Found:
    """*paths* with each directory replaced by the files under it, recursively (sorted, hidden ones skipped); a
    subdirectory that cannot be listed is named, not silently passed over."""
    found: list[Path] = []
    unread: list[str] = []
    if list(paths).count(STDIN) > 1:
        raise OfflineError("standard input (-) can be read once: give - once, the rest as files")
    for path in paths:
        if path == STDIN or not path.is_dir():
            found.append(path)
            continue
        inside: list[Path] = []
        for root, directories, names in os.walk(path, onerror=lambda error: unread.append(
                f"{error.filename}: {error.strerror or error}")):  # fmt: skip
            directories[:] = sorted(name for name in directories if not name.startswith("."))
            inside.extend(Path(root) / name for name in sorted(names) if not name.startswith("."))
        if not inside and not unread:
            raise OfflineError(f"{path}: an empty directory; give it the saved outputs of perf, strace, top, ...")
        found.extend(inside)
    if not found:
        raise OfflineError("no files given: give the saved outputs of perf trace -s, strace -c, top, ...")
    return Found(found, unread)


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
    return fmt.to_facts(records, name_of(path))


@dataclass
class NotRead:
    """The files that could not be read: those that are no tool's output counted by kind, the others named."""

    other: dict[str, int] = dataclasses.field(default_factory=dict)  # "text", "binary", "empty": how many
    problems: list[str] = dataclasses.field(default_factory=list)  # one line each: a tool's error, a cut report
    only: str | None = None  # the one message when a single file was given and not read

    def add(self, path: Path) -> Part | Facts | None:
        """*path* read, or None (and counted or named here) when it cannot be."""
        try:
            text = read_text(path)
        except NotToolOutput as error:
            self.other[error.kind] = self.other.get(error.kind, 0) + 1
            self.only = str(error)
            return None
        except Unreadable as error:
            self.problems.append(str(error))
            return None
        try:
            fmt = formats.detect_format(text, source=str(path))
            records = fmt.parse(text)
        except formats.UnknownFormat as error:
            self.other["text"] = self.other.get("text", 0) + 1
            self.only = str(error)
            return None
        except ArtifactError as error:
            self.problems.append(f"{path}: {error}; {error.advice}")
            return None
        return fmt.to_facts(records, name_of(path))

    @property
    def count(self) -> int:
        """Files not read."""
        return sum(self.other.values()) + len(self.problems)

    def summary(self) -> str | None:
        """One short line for the files that are no tool's output (never the list of formats per file)."""
        total = sum(self.other.values())
        if not total:
            return None
        kinds = ", ".join(f"{count:,} {kind}" for kind, count in sorted(self.other.items(), key=lambda item: -item[1]))
        noun = "file is" if total == 1 else "files are"
        return f"{total:,} {noun} not tool output: {kinds}; formats read: {FORMATS_DOC}"

    def lines(self) -> list[str]:
        """What is said of them: the summary, then each other problem."""
        said = [line for line in (self.summary(),) if line]
        return [*said, *self.problems]


def read_environment(paths: Sequence[Path]) -> Facts:
    """The facts of one environment from its files: artifacts are merged; a schedwatch report stands alone.

    A file that cannot be read is counted or named in the notes, and the rest is analysed: files that are no tool's
    output in one short line, a tool's error or a broken report one line each. When no file can be read,
    OfflineError says why in one line.
    """
    found = find_files(paths)
    read: list[tuple[Path, Part | Facts]] = []
    missing = NotRead()
    for path in found.files:
        part = missing.add(path)
        if part is not None:
            read.append((path, part))
    if not read:
        if missing.count == 1:
            raise OfflineError(missing.problems[0] if missing.problems else str(missing.only))
        raise OfflineError("no file could be read: " + " | ".join(missing.lines()))
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
    said = [f"not read: {line}" for line in missing.lines()]
    if found.unread_directories:
        said.append(f"directories not read: {' | '.join(found.unread_directories)}")
    if said:
        facts = dataclasses.replace(facts, notes=(*facts.notes, *said))
    return facts
