"""The one function every workload and process label value goes through.

Whatever a tenant names (a cgroup directory, a process's comm, a container, a pod), its label value comes out
valid UTF-8, with nothing invisible in it, and bounded, always the same for the same input (a series never
flaps). Quotes, backslashes and newlines would be escaped by the exposition anyway; here newlines and every
other control character are made visible so that no value can look like another or like a line of its own.
"""

from __future__ import annotations

import hashlib
from typing import Any

MAX_LABEL_LENGTH = 200
_DIGEST_LENGTH = 8
_ELLIPSIS = "…"


def label_value(text: str) -> str:
    """*text* made safe to export: visible, valid UTF-8, at most MAX_LABEL_LENGTH characters.

    - an undecodable byte (a surrogate escape from agent.machine.procfs.decode) becomes ``\\xNN``;
    - a control character (C0 with newline, tab and NUL, DEL, C1) becomes ``\\xNN``; any other character that
      is not printable (format characters such as bidi overrides, line and paragraph separators, lone
      surrogates, unassigned code points) becomes ``\\uNNNN`` or ``\\UNNNNNNNN``;
    - a longer value keeps its tail (the informative end of a path) behind ``…`` and a short digest of the
      whole, so that two long values differing only at the head stay two label values.
    """
    if text.isprintable():  # the common case: one C-level pass, nothing to escape
        pieces: list[str] | None = None
        shown = text
    else:
        pieces = [_visible(char) for char in text]
        shown = "".join(pieces)
    if len(shown) <= MAX_LABEL_LENGTH:
        return shown
    return _shortened(shown, pieces if pieces is not None else list(shown))


def visible(text: str) -> str:
    """*text* with every character that is not printable escaped as :func:`label_value` does, but not shortened."""
    return text if text.isprintable() else "".join(_visible(char) for char in text)


def _visible(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _shortened(shown: str, pieces: list[str]) -> str:
    """The tail of *shown* that fits, never cutting an escape in half, behind '…' and a digest of the whole."""
    digest = hashlib.sha256(shown.encode()).hexdigest()[:_DIGEST_LENGTH]
    head = f"{_ELLIPSIS}{digest}{_ELLIPSIS}"
    budget = MAX_LABEL_LENGTH - len(head)
    tail: list[str] = []
    for piece in reversed(pieces):
        if len(piece) > budget:
            break
        tail.append(piece)
        budget -= len(piece)
    return head + "".join(reversed(tail))


MAX_EXPORTED_LENGTH = 1024  # longer than any value label_value makes: anything longer skipped a step


class SampleGuard:
    """The last line of defence: drops a sample whose label values would break the exposition.

    Every label value should already have been made safe by :func:`label_value`; a sample that was not (a
    value that is not a string, not valid UTF-8, or far too long) is left out of the scrape and counted, so
    that one bad row never costs every other workload its series. Values already checked are remembered (a
    bounded set), so a scrape costs one set lookup per label value.
    """

    MAX_REMEMBERED = 65536

    def __init__(self) -> None:
        self._good: set[str] = set()
        self._good_rows: set[tuple[str, ...]] = set()

    def keep_valid_rows(self, rows: list[tuple[str, ...]]) -> list[bool] | None:
        """Which label-value rows are exportable; None when all are (the common case, one set lookup per row)."""
        good_rows = self._good_rows
        if good_rows.issuperset(rows):
            return None
        keep = []
        for row in rows:
            valid = row in good_rows or all(self._valid(value) for value in row)
            if valid and row not in good_rows:
                if len(good_rows) >= 2 * self.MAX_REMEMBERED:
                    good_rows.clear()
                good_rows.add(row)
            keep.append(valid)
        return keep

    def _valid(self, value: object) -> bool:
        if type(value) is str and value in self._good:
            return True
        if not exportable(value):
            return False
        if len(self._good) >= self.MAX_REMEMBERED:
            self._good.clear()
        self._good.add(value)  # type: ignore[arg-type]
        return True

    def keep_valid(self, samples: list[Any]) -> tuple[list[Any], int]:
        """(the samples whose label values are all exportable, how many were dropped)."""
        good = self._good
        kept = []
        for sample in samples:
            for value in sample.labels.values():
                if type(value) is str and value in good:
                    continue
                if not exportable(value):
                    break
                if len(good) >= self.MAX_REMEMBERED:
                    good.clear()
                good.add(value)
            else:
                kept.append(sample)
        return kept, len(samples) - len(kept)


def exportable(value: object) -> bool:
    """Whether *value* can be written as a label value: a bounded string that is valid UTF-8."""
    if not isinstance(value, str) or len(value) > MAX_EXPORTED_LENGTH:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
