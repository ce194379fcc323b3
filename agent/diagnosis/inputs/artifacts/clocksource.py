"""The kernel's clock source: ``dmesg`` / ``journalctl -k`` / kern.log lines about it (the watchdog marking the TSC
unstable, ``Switched to clocksource hpet``), with or without their ``[ 123.456]`` or ``kernel:`` prefixes, and the
files ``current_clocksource`` / ``available_clocksource``. Other kernel lines around them are skipped. From a public
thread (sozu-proxy/sozu#500, lines cut here)::

    [335323.808733] tsc: Marking TSC unstable due to clocksource watchdog
    [335323.813890] clocksource: Switched to clocksource hpet

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.current, report.unstable, len(report.events))
('hpet', (), 2)

Facts (:func:`to_facts`): the node's clock source (the last switch, or the file), the ones available, and the
clock-source lines as events. The rules say what a clock source without a vDSO fast path costs; it is never a
thread-contention cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, meaningful

__all__ = ["FORMAT", "ClocksourceReport", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "clock source"

# Names the kernel gives clock sources (x86, arm64, VMs); a file of only these is current_/available_clocksource.
KNOWN = frozenset(
    {
        "tsc",
        "tsc-early",
        "hpet",
        "acpi_pm",
        "jiffies",
        "refined-jiffies",
        "pit",
        "kvm-clock",
        "xen",
        "hyperv_clocksource_tsc_page",
        "hyperv_clocksource_msr",
        "arch_sys_counter",
        "timebase",
    }
)


@dataclass(frozen=True)
class ClocksourceReport:
    """What the lines or files said: the clock source in use, those available, those marked unstable, the lines."""

    current: str | None
    available: tuple[str, ...] | None
    unstable: tuple[str, ...]
    events: tuple[str, ...]  # the clock-source lines, prefixes removed
    skipped: int = 0  # other lines (other kernel messages, the command, elisions)


_PREFIX = re.compile(r"^(?:> )?(?:\S+ \d+ [\d:]+ \S+ )?(?:kernel: )?(?:\[ *\d+\.\d+\] )?")
_SWITCHED = re.compile(r"clocksource: Switched to clocksource (?P<name>\S+)")
_UNSTABLE = re.compile(r"Marking clocksource '(?P<name>[^']+)' as unstable")
_EVENT = re.compile(r"clocksource:|Marking TSC unstable|TSC found unstable|tsc: .*unstable")


def _clean(text: str) -> list[str]:
    return [_PREFIX.sub("", line.text.strip()).strip() for line in meaningful(lines(text))]


_CAT = re.compile(r"^(?:\S*[$#%] )?cat (?:\S*/)?(?P<file>current_clocksource|available_clocksource)$")


def _is_file(rows: list[str]) -> bool:
    return 1 <= len(rows) <= 2 and all(name in KNOWN for row in rows for name in row.split())


def _cat_files(rows: list[str]) -> dict[str, tuple[str, ...]]:
    """``$ cat .../current_clocksource`` and the line after it, for each file a paste shows so."""
    files: dict[str, tuple[str, ...]] = {}
    for row, following in zip(rows, [*rows[1:], ""][: len(rows)], strict=True):
        cat = _CAT.match(row)
        names = tuple(following.split())
        if cat and names and all(name in KNOWN for name in names):
            files[cat["file"]] = names
    return files


def looks_like(text: str) -> bool:
    """True when *text* holds kernel lines about the clock source, or is a clocksource file of sysfs."""
    rows = _clean(text)
    return (
        _is_file(rows) or bool(_cat_files(rows)) or any(_SWITCHED.search(row) or _UNSTABLE.search(row) for row in rows)
    )


# `cat` and `dmesg` errors are the shell's
looks_like_error = prints_no_error


def parse(text: str) -> ClocksourceReport:
    """The clock source lines or files in *text*; raises NotThisFormat (see .errors)."""
    rows = _clean(text)
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no 'clocksource:' switch or unstable line, and not a clocksource file")
    if _is_file(rows):
        names = [row.split() for row in rows]
        single = [row[0] for row in names if len(row) == 1]
        several = [row for row in names if len(row) > 1]
        current = single[0] if single and (several or len(rows) == 1) else None
        available = tuple(several[0]) if several else None
        if len(rows) == 2 and not several:  # two one-word files: current, then available with one source
            current, available = single[0], (single[1],)
        return ClocksourceReport(current, available, (), ())
    if files := _cat_files(rows):
        shown = files.get("current_clocksource")
        skipped = len(rows) - 2 * len(files)
        return ClocksourceReport(shown[0] if shown else None, files.get("available_clocksource"), (), (), skipped)
    current = None
    unstable: list[str] = []
    events: list[str] = []
    for row in rows:
        if not _EVENT.search(row):
            continue
        events.append(row)
        if switched := _SWITCHED.search(row):
            current = switched["name"]
        if (marked := _UNSTABLE.search(row)) and marked["name"] not in unstable:
            unstable.append(marked["name"])
    return ClocksourceReport(current, None, tuple(unstable), tuple(events), len(rows) - len(events))


def to_facts(report: ClocksourceReport, source: str) -> Part:
    """The node's clock source, those available, and the kernel's clock-source lines."""
    node = NodeView(
        clocksource=report.current, available_clocksources=report.available, clocksource_events=report.events
    )
    notes = ["the clock source is the node's: every process on it reads the time through it"]
    if report.skipped:
        notes.append(f"{source}: {report.skipped} lines not about the clock source were skipped")
    if report.events and report.current is None:
        notes.append("the kernel lines do not say which clock source it switched to: current_clocksource does")
    return Part(FORMAT, source, node, notes=tuple(notes))
