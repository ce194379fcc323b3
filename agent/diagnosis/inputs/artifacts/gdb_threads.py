"""gdb's ``info threads``: one line per thread, its id, its target (``Thread 0x... (LWP n) "name"``, older gdb's
``Thread n``) and the frame it stands in, with the ``*`` of the current thread. Prompts and gdb's own messages are
read past; a line cut short is skipped and named (:mod:`.damage`). From a public thread (logcabin/logcabin#213,
lines cut here)::

    (gdb) info thr
      15 Thread 0x7f034f5d2720 (LWP 5768)  0x00007f034db2c09e in __lll_lock_wait_private () from /lib64/libc.so.6
      10 Thread 0x7f033f5fe700 (LWP 5795)  0x00007f034f1b4334 in __lll_lock_wait () from /lib64/libpthread.so.0
    * 9 Thread 0x7f033ffff700 (LWP 5794)  0x00007f034f1b4334 in __lll_lock_wait () from /lib64/libpthread.so.0

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> [(thread.number, thread.lwp, thread.frame.function) for thread in report.threads][1:]
[(10, 5795, '__lll_lock_wait'), (9, 5794, '__lll_lock_wait')]

Facts (:func:`to_facts`): the threads, and each thread's one frame through the stack classifier (a lock wait, a
yield, a pool's spin loop); one frame shows where a thread stands, not who called: the report says what to collect
(``thread apply all bt``) for the callers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import stack_classes
from agent.diagnosis.inputs.artifacts.backtrace import frame_of_gdb
from agent.diagnosis.inputs.artifacts.damage import Damage, notes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "GdbThread", "GdbThreads", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "gdb info threads"

_START = re.compile(r"^\*?\s*(?P<number>\d+)\s+(?:Thread|LWP|process)\s")
_ROW = re.compile(
    r"^(?P<current>\*)?\s*(?P<number>\d+)\s+(?P<target>(?:Thread 0x[0-9a-fA-F]+ \((?:LWP|lwp) (?P<lwp>\d+)\)|"
    r"Thread (?P<bare>\d+)|LWP (?P<lwp2>\d+)|process (?P<pid>\d+)))(?:\s+\"(?P<name>[^\"]*)\")?\s+"
    r"(?:0x[0-9a-fA-F]+ in )?(?P<frame>[^\s(]+ \(.*\)(?: (?:from|at) \S+)?)$"
)
_HEADER = re.compile(r"^Id\s+Target Id\s+Frame")


@dataclass(frozen=True)
class GdbThread:
    """One thread: gdb's number, its thread id (LWP) where shown, its name, the frame it stands in."""

    number: int
    lwp: int | None
    name: str | None
    frame: Frame
    current: bool = False


@dataclass(frozen=True)
class GdbThreads:
    """The threads of one ``info threads``, and the damaged lines read past."""

    threads: tuple[GdbThread, ...]
    damage: tuple[Damage, ...]


def _rows(text: str) -> list[tuple[int, str]]:
    return [(line.number, " ".join(unquoted(line.text).strip("`").split())) for line in lines(text)]


def looks_like(text: str) -> bool:
    """True when *text* has two or more ``info threads`` rows (``  2 Thread 0x... (LWP n) ... in f () from lib``)."""
    rows = [row for _number, row in _rows(text)]
    found = sum(1 for row in rows if _ROW.match(row))
    return found >= 2 and not any(row.startswith("#0 ") for row in rows)


# not on its own: gdb's attach errors (`ptrace: Operation not permitted`) are the stack format's
looks_like_error = prints_no_error


def parse(text: str) -> GdbThreads:
    """The threads in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `  2 Thread 0x... (LWP n) 0x... in f () from lib` rows of gdb's info threads")
    threads: list[GdbThread] = []
    damage: list[Damage] = []
    for number, row in _rows(text):
        if not row or _HEADER.match(row):
            continue
        if (found := _ROW.match(row)) is not None:
            lwp = found["lwp"] or found["lwp2"] or found["bare"] or found["pid"]
            frame = frame_of_gdb(found["frame"])
            threads.append(
                GdbThread(int(found["number"]), int(lwp) if lwp else None, found["name"], frame, bool(found["current"]))
            )
        elif _START.match(row):
            damage.append(Damage(number, f"a thread's line cut short, skipped ({row[:40]!r})"))
    return GdbThreads(tuple(threads), tuple(damage))


def to_facts(report: GdbThreads, source: str) -> Part:
    """The threads and where each stands, by the stack classifier."""
    stacks = stack_classes.classify(
        (stack_classes.Counted((thread.frame,), 1.0, thread.lwp or thread.number) for thread in report.threads),
        "threads",
    )
    said = (
        f"{source}: {len(report.threads)} threads, one frame each: where each stands, not who called it "
        "(gdb -p PID -batch -ex 'thread apply all bt' shows the callers)",
    )
    workload = WorkloadView(ref=Workload(), threads=len(report.threads), stacks=stacks)
    return Part(FORMAT, source, NodeView(), workload=workload, notes=(*said, *notes(source, report.damage)))
