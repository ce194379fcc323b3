"""Column tables as the tools print them: a header of names, rows of whitespace-separated values.

Whitespace may be collapsed (a paste through a chat or a web form keeps one space), so columns are found by
counting fields, never by character positions. The last column may hold spaces (a command line).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from agent.diagnosis.inputs.artifacts.errors import Malformed
from agent.diagnosis.inputs.artifacts.text import Line, decimal, integer

T = TypeVar("T")


def split_row(line: Line, columns: int, free_last: bool = True) -> list[str]:
    """*line* cut into at most *columns* fields; with *free_last* the last field keeps its inner spaces."""
    if free_last:
        return line.text.split(None, columns - 1)
    return line.fields


def unwrap(rows: Sequence[Line], index: int, complete: Callable[[Line], bool]) -> tuple[Line, int]:
    """The row at *index*, joined with the rows after it while it is not *complete* (a wrapped paste).

    Returns the (possibly joined) row and how many rows it used. A row that never completes comes back alone.
    """
    row = rows[index]
    if complete(row):
        return row, 1
    joined = row
    for used in range(2, 4):  # a pasted row is wrapped once or twice, not more
        if index + used - 1 >= len(rows) or complete(rows[index + used - 1]):
            break
        joined = Line(row.number, f"{joined.text} {rows[index + used - 1].text.strip()}")
        if complete(joined):
            return joined, used
    return row, 1


def convert(fmt: str, line: Line, what: str, token: str, parse: Callable[[str], T]) -> T:
    """*token* parsed by *parse*, or :class:`Malformed` naming *what* and the line."""
    try:
        return parse(token)
    except ValueError:
        raise Malformed(fmt, line.number, f"{what} is {token!r}, not a number") from None


def number(fmt: str, line: Line, what: str, token: str) -> float:
    """A decimal (point or comma) from *token*, or :class:`Malformed`."""
    return convert(fmt, line, what, token, decimal)


def whole(fmt: str, line: Line, what: str, token: str) -> int:
    """A whole number from *token*, or :class:`Malformed`."""
    return convert(fmt, line, what, token, integer)


def optional_number(fmt: str, line: Line, what: str, token: str | None) -> float | None:
    """Like :func:`number`; None for a missing value or the ``-`` the tools print for "not applicable"."""
    if token is None or token == "-":
        return None
    return number(fmt, line, what, token)


def optional_whole(fmt: str, line: Line, what: str, token: str | None) -> int | None:
    """Like :func:`whole`; None for a missing value or ``-``."""
    if token is None or token == "-":
        return None
    return whole(fmt, line, what, token)


def is_rule(line: Line) -> bool:
    """True for a line of dashes separating a table's header from its rows (``------ ----------- ...``)."""
    fields = line.fields
    return bool(fields) and all(set(field) == {"-"} for field in fields)
