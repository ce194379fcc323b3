"""The one function every workload and process label value goes through.

Whatever a tenant names (a cgroup directory, a process's comm, a container, a pod), its label value comes out
valid UTF-8, with nothing invisible in it, and bounded, always the same for the same input (a series never
flaps). Quotes, backslashes and newlines would be escaped by the exposition anyway; here newlines and every
other control character are made visible so that no value can look like another or like a line of its own.
"""

from __future__ import annotations

import hashlib

MAX_LABEL_LENGTH = 200
_DIGEST_LENGTH = 8
_ELLIPSIS = "…"


def label_value(text: str) -> str:
    """*text* made safe to export: visible, valid UTF-8, at most MAX_LABEL_LENGTH characters.

    - an undecodable byte (a surrogate escape from agent.procfs.decode) becomes ``\\xNN``;
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
