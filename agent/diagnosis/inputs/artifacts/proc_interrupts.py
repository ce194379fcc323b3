"""``/proc/interrupts``: hardware interrupts per source (a device's IRQ number, or the kernel's named ones: ``LOC``,
``RES``, ``CAL``, ``TLB``, ``NMI``) and per CPU, since boot; one reading, or two pasted one after the other (the
difference is what happened between them). Lines ``grep`` kept without the CPU header are read by their count of
numbers. A row cut short is skipped and named (:mod:`.damage`). Recorded here (the fixtures' README), cut::

    CPU0       CPU1
     31:          0        296 PCI-MSIX-0000:00:01.0   3-edge      virtio0-stats
    LOC:     708122     751863   Local timer interrupts

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.cpus, report.readings[0]["virtio0-stats"], report.readings[0]["LOC"])
(2, (0.0, 296.0), (708122.0, 751863.0))

Facts (:func:`to_facts`): the interrupts per source and CPU (``NodeView.interrupts``), since boot or between two
readings; the rules say when a device's interrupts pile onto one CPU, never a contention cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, SoftirqCounts
from agent.diagnosis.inputs.artifacts.damage import Damage, notes
from agent.diagnosis.inputs.artifacts.errors import Malformed, NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "ProcInterrupts", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "/proc/interrupts"

_HEADER = re.compile(r"^(?:CPU\d+\s*)+$")
_ROW = re.compile(r"^(?P<irq>\d+|[A-Z]{3}|[A-Z][A-Za-z]{2,}):\s+(?P<rest>\d.*)$")


@dataclass(frozen=True)
class ProcInterrupts:
    """Each reading's counts by source (a device's name, or the kernel's row name) and CPU; the damage read past."""

    cpus: int | None
    readings: tuple[dict[str, tuple[float, ...]], ...]
    damage: tuple[Damage, ...]


def _rows(text: str) -> list[tuple[int, str]]:
    return [(line.number, " ".join(unquoted(line.text).strip("`").split())) for line in lines(text)]


def looks_like(text: str) -> bool:
    """True when *text* has /proc/interrupts rows (``31: 0 260 PCI-MSIX ... virtio0-stats``, ``LOC: ...``): with the
    ``CPU0 CPU1`` header, or two device rows that end in a name after their counts."""
    rows = [row for _n, row in _rows(text)]
    header = any(_HEADER.match(row) for row in rows)
    found = [row for row in rows if _ROW.match(row)]
    named = sum(1 for row in found if re.search(r"[A-Za-z]", row.split(":", 1)[1]))
    numbered = any(row.split(":", 1)[0].isdigit() for row in found)  # /proc/softirqs has names only
    return numbered and ((header and len(found) >= 1) or named >= 2)


# a file read prints no error of its own
looks_like_error = prints_no_error


def _counts(rest: str, cpus: int | None) -> tuple[tuple[float, ...], str]:
    fields = rest.split()
    numbers: list[float] = []
    for field in fields:
        if not field.isdigit() or (cpus is not None and len(numbers) == cpus):
            break
        numbers.append(float(field))
    return tuple(numbers), " ".join(fields[len(numbers) :])


def parse(text: str) -> ProcInterrupts:
    """The readings in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `CPU0 CPU1` header and `31: 0 260 ... name` rows")
    cpus: int | None = None
    readings: list[dict[str, tuple[float, ...]]] = []
    damage: list[Damage] = []
    current: dict[str, tuple[float, ...]] | None = None
    for number, row in _rows(text):
        if _HEADER.match(row):
            cpus = len(row.split())
            current = {}
            readings.append(current)
            continue
        found = _ROW.match(row)
        if found is None:
            continue
        if current is None:
            current = {}
            readings.append(current)
        counts, described = _counts(found["rest"], cpus)
        if cpus is not None and len(counts) < cpus and found["irq"] not in ("ERR", "MIS"):
            damage.append(Damage(number, f"IRQ {found['irq']}: {len(counts)} of {cpus} CPUs' counts, skipped"))
            continue
        name = found["irq"] if not found["irq"].isdigit() else (described.split()[-1] if described else found["irq"])
        if name in current:
            name = f"{name} ({found['irq']})"
        current[name] = counts
    if cpus is None and readings:
        cpus = max((len(counts) for reading in readings for counts in reading.values()), default=None)
    kept = tuple(reading for reading in readings if reading)
    if not kept:  # every row damaged: nothing left to read
        raise Malformed(FORMAT, damage[-1].line if damage else 1, "no row with a count for every CPU of the header")
    return ProcInterrupts(cpus, kept, tuple(damage))


def to_facts(report: ProcInterrupts, source: str) -> Part:
    """The interrupts per source and CPU: since boot (one reading) or between the first and the last."""
    first, last = report.readings[0], report.readings[-1]
    if len(report.readings) > 1:
        by_source = {name: tuple(after - before for before, after in zip(first[name], counts, strict=False))
                     for name, counts in last.items() if name in first}  # fmt: skip
        said = f"{source}: {len(report.readings)} readings of /proc/interrupts: the difference of the first and last"
    else:
        by_source, said = dict(last), f"{source}: one reading of /proc/interrupts: counts since boot"
    node = NodeView(interrupts=SoftirqCounts(since_boot=len(report.readings) == 1, by_type=by_source))
    return Part(FORMAT, source, node, notes=(said, *notes(source, report.damage)))
