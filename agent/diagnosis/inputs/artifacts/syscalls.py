"""The record two tracers' summaries share: one system call's row of ``perf trace -s`` or ``strace -c``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SyscallStat:
    """One system call's row in a ``perf trace -s`` or ``strace -c`` table.

    perf prints total/min/avg/max in milliseconds and stddev in percent of the mean; strace prints the total in
    seconds (converted here to ms), the mean in microseconds (``usecs/call``, converted to ms) and the share of
    the traced time (``% time``). Fields a tool does not print are None.
    """

    name: str
    calls: int
    total_ms: float
    avg_ms: float | None
    errors: int | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    stddev_percent: float | None = None
    time_percent: float | None = None
