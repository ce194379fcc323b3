"""``/proc/stat``: the node's CPU time by state, read with the one parser of the file
(:func:`agent.machine.node_stat.parse_proc_stat`). One reading gives the shares since boot; two readings (one
pasted after the other) give the shares between them, and the context switches per second. Prompts, ``==> /proc/stat
<==`` headers of ``head``, and a last line cut short are read past. From a public thread (prometheus/procfs#50)::

    cpu  547 0 702 3574 206 29 3 0 0
    cpu0 547 0 702 3574 206 29 3 0 0

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (len(report.readings), report.readings[0].total.system, sorted(report.readings[0].cpus))
(1, 702, [0])

Facts (:func:`to_facts`): the node's CPU shares (user, nice, system, idle, iowait, irq, softirq, steal) and its
online CPUs; since boot (``CpuShares.since_boot``) from one reading, else between the first and the last, with the
context switches per second (the window from the ticks counted, at the USER_HZ of 100 that x86 and arm kernels use).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from agent.diagnosis.facts import CpuShares, NodeView
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted
from agent.machine.node_stat import STATES, CpuTicks, NodeTicks, parse_proc_stat

__all__ = ["FORMAT", "ProcStat", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "/proc/stat"
USER_HZ = 100  # the unit of /proc/stat's times on x86 and arm (sysconf(_SC_CLK_TCK))

_TOTAL = re.compile(r"^cpu(?: \d+){4,}$")
_CPU = re.compile(r"^cpu\d*(?: \d+)+$")
_COUNTER = re.compile(r"^(?:intr|ctxt|btime|processes|procs_running|procs_blocked|softirq|page|swap)(?: \d+)+$")


@dataclass(frozen=True)
class ProcStat:
    """The readings of /proc/stat in a paste, and the lines read past."""

    readings: tuple[NodeTicks, ...]
    skipped: int  # prompts, headers, other files' lines
    cut: int  # cpu lines with fewer states than the total line (a paste cut short)


def _clean(text: str) -> list[str]:
    return [" ".join(unquoted(line.text).split()) for line in lines(text)]


def looks_like(text: str) -> bool:
    """True when *text* has the total ``cpu`` line of /proc/stat (``cpu  547 0 702 3574 ...``)."""
    return any(_TOTAL.match(row) for row in _clean(text))


# reading /proc/stat does not fail in a way its reader prints
looks_like_error = prints_no_error


def parse(text: str) -> ProcStat:
    """The readings in *text* (each starts at a total ``cpu`` line); raises NotThisFormat (see .errors)."""
    blocks: list[list[str]] = []
    skipped = cut = 0
    width = 0
    for row in _clean(text):
        if not row:
            continue
        if _TOTAL.match(row):
            blocks.append([row])
            width = len(row.split())
        elif blocks and _CPU.match(row):
            if len(row.split()) < min(width, 1 + len(STATES)):
                cut += 1  # a cpuN line cut short: its missing states are not 0
            else:
                blocks[-1].append(row)
        elif blocks and _COUNTER.match(row):
            blocks[-1].append(row)
        else:
            skipped += 1
    if not blocks:
        raise NotThisFormat(FORMAT, "no total `cpu  user nice system idle ...` line")
    return ProcStat(tuple(parse_proc_stat("\n".join(block)) for block in blocks), skipped, cut)


def _shares(ticks: CpuTicks, since_boot: bool) -> CpuShares | None:
    total = ticks.total
    if total <= 0:
        return None
    shares = {state.name: 100 * getattr(ticks, state.name) / total for state in fields(ticks)}
    return CpuShares(**shares, since_boot=since_boot)


def _between(first: CpuTicks, last: CpuTicks) -> CpuTicks:
    return CpuTicks(*(getattr(last, state) - getattr(first, state) for state in STATES))


def to_facts(report: ProcStat, source: str) -> Part:
    """The node's CPU shares and CPUs; since boot from one reading, else between the first and the last."""
    first, last = report.readings[0], report.readings[-1]
    cpus = len(last.cpus) or None
    notes: list[str] = []
    switches = None
    if len(report.readings) == 1:
        ticks = last.total
        notes.append(f"{source}: one reading of /proc/stat: CPU shares since boot, not of a window")
    else:
        ticks = _between(first.total, last.total)
        notes.append(f"{source}: {len(report.readings)} readings of /proc/stat: CPU shares between the first and last")
        seconds = ticks.total / (USER_HZ * cpus) if cpus else None
        if seconds and first.context_switches is not None and last.context_switches is not None:
            switches = (last.context_switches - first.context_switches) / seconds
            notes.append(f"{source}: {seconds:.1f} s between the readings (their ticks at USER_HZ {USER_HZ})")
    shares = _shares(ticks, since_boot=len(report.readings) == 1)
    if shares is None:
        notes.append(f"{source}: every CPU time in it is 0: it counts nothing (a sandbox's /proc?)")
    if report.cut:
        notes.append(f"{source}: {report.cut} cpu line(s) cut short were skipped")
    node = NodeView(
        cpus=cpus,
        cpu=shares,
        context_switches_per_second=switches,
    )
    return Part(FORMAT, source, node, notes=tuple(notes))
