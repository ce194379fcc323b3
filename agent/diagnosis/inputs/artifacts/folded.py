"""Folded stacks, one stack a line, root first, then its count: what ``stackcollapse-perf.pl`` makes of ``perf
script`` (kernel frames marked ``_[k]``), ``py-spy record -f raw`` (``func (file.py:LINE)``, with ``--native``
``func (lib.so)``), ``bpftrace``/``bcc`` output folded the same way. Pasted lines may be indented or quoted, and a
frame may be an elision (``[...more user code...]``). From a public thread (benfred/py-spy#179, lines cut here)::

    run (gevent/hub.py:582) 499
    _worker (gevent/threadpool.py:270);get (gevent/_threading.py:166);wait (gevent/_threading.py:84) 500

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> [(stack.frames[-1].function, stack.frames[-1].library, stack.count) for stack in report.stacks]
[('run', 'hub.py', 499), ('wait', '_threading.py', 500)]

Facts (:func:`to_facts`): the leaf frames as on-CPU samples (``cpu_samples``, their total: every stack's count;
whether idle stacks were left out is the profiler's choice), and the callers of sched_yield and of futex waits
(``yield_sites``, ``futex_sites``) counted by samples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, sampled, stack_classes
from agent.diagnosis.inputs.artifacts.damage import read_past
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "FoldedReport", "FoldedStack", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "folded stacks"

_LINE = re.compile(r"^(?P<stack>\S.*?) (?P<count>\d+)$")
_PLACE = re.compile(r"^(?P<function>.+?) \((?P<where>[^()]+)\)$")
WAKER = "--"  # offwaketime's folded stacks: the blocked thread's frames, "--", then its waker's
_ELIDED = re.compile(r"^\[\.\.\..*\]$|^\.\.\.$")


@dataclass(frozen=True)
class FoldedStack:
    """One folded stack: frames root first, its count."""

    frames: tuple[Frame, ...]
    count: int


@dataclass(frozen=True)
class FoldedReport:
    """The stacks, and what was read past."""

    stacks: tuple[FoldedStack, ...]
    skipped: int
    elided_frames: int


def _frame(text: str) -> Frame | None:
    text = text.strip()
    if _ELIDED.match(text):
        return None
    if text.endswith("_[k]"):
        return Frame(code.function(text[: -len("_[k]")]), code.KERNEL)
    place = _PLACE.match(text)
    if place is None:
        return Frame(code.function(text), code.UNKNOWN)
    where = place["where"]
    if ":" in where and not where.startswith("["):
        where = where.rsplit(":", 1)[0]  # a Python frame: its file
    return Frame(code.function(place["function"]), code.library(where))


def _stack(text: str) -> tuple[FoldedStack, int] | None:
    match = _LINE.match(text)
    if match is None or (";" not in match["stack"] and " (" not in match["stack"]):
        return None
    parts = match["stack"].split(";")
    frames = [frame for part in parts if (frame := _frame(part)) is not None]
    if not frames:
        return None
    return FoldedStack(tuple(frames), int(match["count"])), len(parts) - len(frames)


def _rows(text: str) -> list[str]:
    """The pasted lines, a stack a terminal wrapped (a line with frames but no count, then its rest) joined again."""
    rows: list[str] = []
    for line in lines(text):
        clean = unquoted(line.text)
        if not clean:
            continue
        if rows and ";" in rows[-1] and _LINE.match(rows[-1]) is None and ";" in clean.split(" ", 1)[0]:
            rows[-1] += clean  # a terminal wraps mid-name, without a space
        else:
            rows.append(clean)
    return rows


def looks_like(text: str) -> bool:
    """True when *text* has folded stacks and more stack lines than other lines (a last stack cut before its count
    aside): two or more, or one and nothing else."""
    rows = _rows(text)
    found = sum(1 for row in rows if _stack(row) is not None)
    other = len(rows) - found - (1 if rows and ";" in rows[-1] and _stack(rows[-1]) is None else 0)
    return (found >= 2 and found > other) or (found == 1 and other == 0)


# the tools that fold stacks print their errors to another stream
looks_like_error = prints_no_error


def parse(text: str) -> FoldedReport:
    """The folded stacks in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `frame;frame;frame COUNT` lines")
    stacks: list[FoldedStack] = []
    skipped = elided = 0
    for row in _rows(text):
        found = _stack(row)
        if found is None:
            skipped += 1
            continue
        stacks.append(found[0])
        elided += found[1]
    return FoldedReport(tuple(stacks), skipped, elided)


def to_facts(report: FoldedReport, source: str) -> Part:
    """On-CPU samples by leaf frame, and the callers of sched_yield and futex waits."""
    off_cpu = [stack for stack in report.stacks if any(frame.function == WAKER for frame in stack.frames)]
    stacks = [sampled.Counted(tuple(reversed(stack.frames)), stack.count)
              for stack in report.stacks if stack not in off_cpu]  # fmt: skip
    yield_sites, futex_sites = sampled.call_sites(stacks)
    notes = [f"{source}: {len(report.stacks)} folded stacks: a profile's counts, not how long it ran"]
    notes += read_past(
        source,
        (len(off_cpu), "stack(s) with a waker after `--` (offwaketime): off-CPU time, not read"),
        (report.elided_frames, "elided frame(s) (`[...]`) read past"),
        (report.skipped, "lines that are not folded stacks skipped"),
    )
    workload = WorkloadView(
        ref=Workload(),
        cpu_samples=sampled.leaf_samples(stacks),
        cpu_samples_total=float(sum(stack.weight for stack in stacks)) if stacks else None,
        yield_sites=yield_sites,
        futex_sites=futex_sites,
        stacks=stack_classes.classify((stack_classes.Counted(s.frames, s.weight) for s in stacks), "samples"),
    )
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
