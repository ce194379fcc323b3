"""Text as people paste it, made regular: terminal escapes, odd line ends, odd spaces and decimal commas.

Every parser reads its input through :func:`lines`, so that one set of rules decides what a pasted file means.
Line numbers are those of the text once line ends are made regular (a carriage return alone ends a line, as a
terminal shows it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

# CSI sequences (colours, cursor moves, erase), character-set selection, keypad modes, OSC titles.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78cDEHM]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_WIDE_SPACES = re.compile(r"[\t\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_INVISIBLE = re.compile(r"[\ufeff\u200b-\u200d\u2060]")
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)")
_INTEGER = re.compile(r"[+-]?\d+")


def decode(raw: bytes) -> str:
    """Bytes of a saved paste -> text: UTF-8 or, with a byte-order mark, UTF-16 (Windows editors save pastes so).

    Bytes that are not UTF-8 (a Latin-1 name in a command column) become U+FFFD; they never stop a parse.
    """
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", "replace")
    return raw.decode("utf-8", "replace")


class Line(NamedTuple):
    """One line of an artifact: its 1-based number and its text (escapes removed, spaces made plain)."""

    number: int
    text: str

    @property
    def fields(self) -> list[str]:
        """The whitespace-separated fields (any run of spaces is one separator)."""
        return self.text.split()


def lines(text: str, first: int = 1) -> list[Line]:
    """*text* split into :class:`Line` s, terminal escapes and invisible characters removed, trailing space cut;
    numbered from *first* (a part of a longer text keeps the whole text's line numbers)."""
    if "\x1b" in text:
        text = _ESCAPES.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    result = []
    for number, raw in enumerate(text.split("\n"), start=first):
        if not (raw.isascii() and raw.isprintable()):  # most lines of a tool's output need nothing undone
            raw = _CONTROLS.sub("", _WIDE_SPACES.sub(" ", _INVISIBLE.sub("", raw)))
        result.append(Line(number, raw.rstrip()))
    return result


def unquoted(text: str) -> str:
    """*text* without the ``>`` quote prefixes (any depth) and surrounding spaces a pasted reply adds."""
    stripped = text.strip()
    while stripped.startswith(">"):
        stripped = stripped[1:].strip()
    return stripped


def meaningful(all_lines: list[Line]) -> list[Line]:
    """The lines that hold anything but spaces."""
    return [line for line in all_lines if line.text.strip()]


def trimmed(rows: list[Line], first: Callable[[Line], bool], last: Callable[[Line], bool]) -> list[Line]:
    """*rows* from the first that *first* accepts to the last that *last* accepts.

    A paste often carries the shell prompt and the command above the output and a prompt below it; those go.
    """
    start = next((i for i, line in enumerate(rows) if first(line)), len(rows))
    end = next((i + 1 for i in range(len(rows) - 1, start - 1, -1) if last(rows[i])), start)
    return rows[start:end]


def is_decimal(token: str) -> bool:
    """True for a decimal number written with a point or a comma (``52.28``, ``52,28``, ``7``)."""
    return _DECIMAL.fullmatch(token) is not None


def decimal(token: str) -> float:
    """``52.28`` or ``52,28`` (locales with decimal commas) -> 52.28; a trailing ``%`` is allowed.

    Raises ValueError for anything else. The tools read here never group thousands, so a comma is a decimal mark.
    """
    token = token.removesuffix("%")
    if token.replace(".", "", 1).isdigit() and token.isascii():  # the common case, without the pattern
        return float(token)
    if not is_decimal(token):
        raise ValueError(f"not a number: {token!r}")
    return float(token.replace(",", "."))


def integer(token: str) -> int:
    """``5119771`` -> 5119771; raises ValueError for anything else."""
    if _INTEGER.fullmatch(token) is None:
        raise ValueError(f"not a whole number: {token!r}")
    return int(token)


def docstring_sample(doc: str | None) -> str:
    """The indented block after the first line ending in ``::`` of *doc* (each parser's docstring holds one).

    The block's common indentation is removed; it ends at the first line indented less than it.
    """
    if not doc:
        raise ValueError("no docstring")
    doc_lines = doc.splitlines()
    start = next(i for i, line in enumerate(doc_lines) if line.rstrip().endswith("::")) + 1
    while start < len(doc_lines) and not doc_lines[start].strip():
        start += 1
    indent = len(doc_lines[start]) - len(doc_lines[start].lstrip())
    block = []
    for line in doc_lines[start:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        block.append(line[indent:])
    return "\n".join(block).rstrip() + "\n"
