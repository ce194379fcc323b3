"""Numbers as the reports print them, one way for the terminal, the page and the budget."""

from __future__ import annotations

import math


def number(value: float) -> str:
    """A value as people read it: 5,119,771 · 61.4 · 1.97 · 0.0123."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def plural(count: int, noun: str) -> str:
    """ "1 thread", "2 threads"."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def with_unit(value: float, unit: str) -> str:
    """*value* and its unit, a plural unit made singular for exactly one ("1 thread")."""
    if unit == "%":
        return f"{number(value)} %"
    if value == 1 and unit in ("threads", "calls", "tasks", "processes", "CPUs"):
        unit = unit.removesuffix("es") if unit == "processes" else unit.removesuffix("s")
    return f"{number(value)} {unit}".rstrip()
