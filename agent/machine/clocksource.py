"""The node's clock source: the one the kernel reads time from, and those it could use
(/sys/devices/system/clocksource/clocksource0). Whether clock reads can stay in user space (the vDSO) depends on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYSFS_CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0")


@dataclass(frozen=True)
class ClockSource:
    """The clock source in use and the available ones; None where sysfs does not say."""

    current: str | None
    available: tuple[str, ...] | None


def read_clocksource(directory: Path = SYSFS_CLOCKSOURCE) -> ClockSource:
    """current_clocksource and available_clocksource of *directory*."""
    return ClockSource(_read(directory / "current_clocksource"), _names(_read(directory / "available_clocksource")))


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return text or None


def _names(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(text.split())
