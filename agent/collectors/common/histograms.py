"""Prometheus histogram rows from the kernel's per-bucket counts: the `le` values, and the counts made cumulative."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate

from prometheus_client.utils import floatToGoString

_go_float: Callable[[float], str] = floatToGoString


def bucket_labels(bounds: Sequence[float]) -> tuple[str, ...]:
    """The `le` label values for histogram *bounds*, +Inf last."""
    return (*(_go_float(bound) for bound in bounds), "+Inf")


def cumulative(counts: Sequence[int]) -> tuple[int, ...]:
    """Per-bucket counts -> the cumulative counts Prometheus histograms carry."""
    return tuple(accumulate(counts))
