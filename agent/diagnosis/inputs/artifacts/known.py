"""Totals and means over what a tool printed: ``None`` is a value it did not print, never 0."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def sum_known(values: Iterable[float | int | None]) -> float | None:
    """The sum of the printed *values*; None when none was printed."""
    known = [value for value in values if value is not None]
    return float(sum(known)) if known else None


def mean_known(values: Iterable[float | None]) -> float | None:
    """The mean of the printed *values*; None when none was printed."""
    known = [value for value in values if value is not None]
    return statistics.fmean(known) if known else None


def seconds_by_call(times: Iterable[tuple[str, float]]) -> dict[str, float] | None:
    """(system call, seconds) pairs added up per call; None when there are none."""
    total: dict[str, float] = {}
    for name, seconds in times:
        total[name] = total.get(name, 0.0) + seconds
    return total or None
