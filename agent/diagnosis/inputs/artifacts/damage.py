"""What a damaged paste cost: the lines a parser skipped or could read only in part, each with its line number and
what was kept, so that a report names the damage instead of refusing the file.

Parsers collect :class:`Damage` entries while they read (a row cut short, wrapped, garbled; a last block cut off)
and their ``to_facts`` turn them into one note (:func:`note`), which every renderer shows with the other notes.

>>> note("perf-trace.txt", (Damage(12, "a row cut short: skipped"), Damage(40, "the last block cut: read to here")))
'perf-trace.txt: damaged lines: line 12: a row cut short: skipped; line 40: the last block cut: read to here'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from agent.diagnosis.inputs.artifacts.errors import Malformed

T = TypeVar("T")
R = TypeVar("R")

SHOWN = 5  # damaged lines named one by one; the rest counted


@dataclass(frozen=True)
class Damage:
    """One damaged line: its number as the file shows it, and what the parser did with it (what it kept)."""

    line: int
    what: str


def note(source: str, damage: Iterable[Damage]) -> str | None:
    """One note naming the damaged lines of *source* (the first few, then how many more); None without damage."""
    found = list(damage)
    if not found:
        return None
    shown = "; ".join(f"line {item.line}: {item.what}" for item in found[:SHOWN])
    more = f" (and {len(found) - SHOWN} more damaged lines)" if len(found) > SHOWN else ""
    return f"{source}: damaged lines: {shown}{more}"


def notes(source: str, damage: Iterable[Damage]) -> tuple[str, ...]:
    """:func:`note` as a tuple of zero or one note, to add to a part's notes."""
    said = note(source, damage)
    return () if said is None else (said,)


def read_past(source: str, *counts: tuple[int, str]) -> list[str]:
    """A note ``SOURCE: N what`` for each of *counts* above 0: lines skipped, rows cut short, elisions read past.

    >>> read_past("dump.txt", (2, "lines skipped"), (0, "rows cut short"))
    ['dump.txt: 2 lines skipped']
    """
    return [f"{source}: {count} {what}" for count, what in counts if count]


def read_rows(rows: Iterable[R], read: Callable[[R], T], damage: list[Damage]) -> list[T]:
    """Each of *rows* read by *read*; a row it finds malformed is skipped and named in *damage*."""
    found: list[T] = []
    for row in rows:
        try:
            found.append(read(row))
        except Malformed as error:
            damage.append(Damage(error.line, f"{error.reason}: skipped"))
    return found
