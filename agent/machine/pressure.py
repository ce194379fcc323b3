"""Pressure stall information (PSI): the kernel's own account of time tasks were stalled on a CPU, memory or I/O.

Each file (``/proc/pressure/{cpu,memory,io}``, and ``{cpu,memory,io}.pressure`` in every cgroup2 directory) has a
``some`` line (time at least one task was stalled) and, except for the CPU of the whole system before Linux 5.13,
a ``full`` line (time every non-idle task was stalled at once), each ending in ``total=`` microseconds::

    some avg10=0.00 avg60=0.00 avg300=0.00 total=5609
    full avg10=0.00 avg60=0.00 avg300=0.00 total=3482

A cgroup's totals include its descendants' tasks, and stalls of two cgroups overlap in time: totals are never
summed across a cgroup and its ancestors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RESOURCES = ("cpu", "memory", "io")
PROC_PRESSURE = Path("/proc/pressure")


@dataclass(frozen=True)
class Pressure:
    """One resource's stall totals, in microseconds; *full* is None where the kernel has no full line."""

    some_us: int
    full_us: int | None


def parse_pressure(text: str) -> Pressure | None:
    """The totals of one pressure file's text; None when it has no ``some`` total (not a PSI file)."""
    totals: dict[str, int] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        for field in rest.split():
            name, _, value = field.partition("=")
            if name == "total" and value.isdigit():
                totals[kind] = int(value)
    if "some" not in totals:
        return None
    return Pressure(totals["some"], totals.get("full"))


def node_pressure_available(root: Path = PROC_PRESSURE) -> bool:
    """Whether the kernel accounts pressure at all (CONFIG_PSI, not disabled with psi=0)."""
    try:
        return parse_pressure((root / "cpu").read_text()) is not None
    except OSError:
        return False
