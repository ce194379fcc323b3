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

from agent.diagnosis.facts import CodeShare, NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code
from agent.diagnosis.inputs.artifacts.backtrace import FUTEX, LIBC_FILES, YIELD, Frame
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "FoldedReport", "FoldedStack", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "folded stacks"

_LINE = re.compile(r"^(?P<stack>\S.*?) (?P<count>\d+)$")
_PLACE = re.compile(r"^(?P<function>.+?) \((?P<where>[^()]+)\)$")
_ELIDED = re.compile(r"^\[\.\.\..*\]$|^\.\.\.$")
PYTHON_YIELD = re.compile(r"^os_sched_yield$")  # CPython's os.sched_yield, whose libc call py-spy shows unnamed


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


def looks_like(text: str) -> bool:
    """True when *text* has two or more folded stacks and more stack lines than other lines."""
    found = other = 0
    for line in lines(text):
        clean = unquoted(line.text)
        if not clean:
            continue
        if _stack(clean) is not None:
            found += 1
        else:
            other += 1
    return found >= 2 and found > other


def looks_like_error(text: str) -> bool:
    """Never: the tools that fold stacks print their errors to another stream."""
    return False


def parse(text: str) -> FoldedReport:
    """The folded stacks in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `frame;frame;frame COUNT` lines")
    stacks: list[FoldedStack] = []
    skipped = elided = 0
    for line in lines(text):
        clean = unquoted(line.text)
        if not clean:
            continue
        found = _stack(clean)
        if found is None:
            skipped += 1
            continue
        stacks.append(found[0])
        elided += found[1]
    return FoldedReport(tuple(stacks), skipped, elided)


def _is_yield(frame: Frame) -> bool:
    name = frame.function or ""
    return bool(YIELD.search(name) or PYTHON_YIELD.search(name))


def _site(frames: tuple[Frame, ...], at: int) -> tuple[str, str | None]:
    """The caller of frames[at]: the nearest frame towards the root outside the C library and the yield call."""
    for frame in reversed(frames[:at]):
        if not LIBC_FILES.match(frame.library) and not _is_yield(frame):
            return frame.library, frame.function
    return code.UNKNOWN, None


def to_facts(report: FoldedReport, source: str) -> Part:
    """On-CPU samples by leaf frame, and the callers of sched_yield and futex waits."""
    leaves: dict[tuple[str, str | None, str], float] = {}
    yields: dict[tuple[str, str | None], float] = {}
    futexes: dict[tuple[str, str | None], float] = {}
    for stack in report.stacks:
        leaf = stack.frames[-1]
        mode = "kernel" if leaf.library == code.KERNEL else "user"
        key = (leaf.library, leaf.function, mode)
        leaves[key] = leaves.get(key, 0.0) + stack.count
        user = [index for index, frame in enumerate(stack.frames) if frame.library != code.KERNEL]
        for index in reversed(user):
            frame = stack.frames[index]
            if _is_yield(frame):
                site = _site(stack.frames, index)
                yields[site] = yields.get(site, 0.0) + stack.count
                break
            if FUTEX.search(frame.function or ""):
                site = _site(stack.frames, index)
                futexes[site] = futexes.get(site, 0.0) + stack.count
                break

    def rows(counted: dict[tuple[str, str | None], float]) -> tuple[CodeShare, ...] | None:
        ordered = sorted(counted.items(), key=lambda item: -item[1])
        return tuple(CodeShare(library, function, "user", count) for (library, function), count in ordered) or None

    samples = tuple(
        CodeShare(library, function, mode, count)
        for (library, function, mode), count in sorted(leaves.items(), key=lambda item: -item[1])
    )
    notes = [f"{source}: {len(report.stacks)} folded stacks: a profile's counts, not how long it ran"]
    if report.elided_frames:
        notes.append(f"{source}: {report.elided_frames} elided frame(s) (`[...]`) read past")
    if report.skipped:
        notes.append(f"{source}: {report.skipped} lines that are not folded stacks skipped")
    workload = WorkloadView(
        ref=Workload(),
        cpu_samples=samples,
        cpu_samples_total=float(sum(stack.count for stack in report.stacks)),
        yield_sites=rows(yields),
        futex_sites=rows(futexes),
    )
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
