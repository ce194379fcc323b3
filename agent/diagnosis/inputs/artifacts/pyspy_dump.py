"""``py-spy dump``: each Python thread of a process, whether it was on a CPU (``active``) or not (``idle``), and its
stack, Python frames (``func (file.py:LINE)``) and, with ``--native``, C frames (``func (lib.so)``). ``--locals``
lines, the ``Process``/``Python`` header, prompts and a frame cut short are read past. From a public thread
(intel/gprofiler#612, frames cut here)::

    Thread 0x7F768F77C740 (idle): "MainThread"
        wait (threading.py:295)
        result (_base.py:427)
        _snapshot (main.py:278)

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> dump = parse(docstring_sample(__doc__))
>>> thread = dump.threads[0]
>>> (thread.name, thread.active, thread.state, thread.frames[2].function, thread.frames[2].library)
('MainThread', False, 'futex', '_snapshot', 'main.py')

Each thread's state: an idle thread in a lock, condition or queue wait of the standard library (or, with
``--native``, in a futex wait) is ``futex``, in a selector or socket call ``io``, otherwise ``idle``; an active
thread in sched_yield is ``yield``, else ``running``.

Facts (:func:`to_facts`): the callers of sched_yield and of futex waits (``yield_sites``, ``futex_sites``: the first
frame outside the C library, the interpreter and the standard library's locks and queues, one per thread), the
running threads' innermost frames as on-CPU samples (one per thread: a dump is one moment). Native threads a dump
does not list (a BLAS pool's) are not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, moment, sampled, stack_classes
from agent.diagnosis.inputs.artifacts.backtrace import state_of
from agent.diagnosis.inputs.artifacts.damage import read_past
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "PySpyDump", "PyThread", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "py-spy dump"

_THREAD = re.compile(r'^Thread (?P<id>0x[0-9A-Fa-f]+|\d+) \((?P<status>[a-z+]+)\)(?:: "(?P<name>.*)")?$')
_FRAME = re.compile(r"^(?P<function>\S.*?) \((?P<where>[^()]+)\)$")
_PROCESS = re.compile(r"^Process \d+: ")
_INTERPRETER = re.compile(r"^(?:lib)?python\d")  # the interpreter's own C frames (python3.11, libpython3.11.so)
_LOCKS = frozenset({"threading.py", "queue.py", "_base.py", "synchronize.py", "connection.py"})
_PY_WAITS = re.compile(r"^(?:wait|acquire|_wait_for_tstate_lock|join|get|put|result|_recv|recv_bytes)$")
_PY_IO = re.compile(r"^(?:select|poll|epoll|_poll|recv|recvfrom|recv_into|accept|read|readline|readinto|_read_ready)$")


@dataclass(frozen=True)
class PyThread:
    """One thread of the dump: its id as py-spy prints it, name, whether py-spy saw it on a CPU, frames (innermost
    first) and where it stands."""

    ident: str
    name: str | None
    active: bool
    frames: tuple[Frame, ...]
    state: str  # "yield", "futex", "io", "running", "idle"


@dataclass(frozen=True)
class PySpyDump:
    """The threads of one dump (of several, all), and the lines read past."""

    threads: tuple[PyThread, ...]
    skipped: int
    cut: int  # frame lines cut short


def _frame(text: str) -> Frame | None:
    match = _FRAME.match(text)
    if match is None:
        return None
    where = match["where"]
    source = where if ":" in where else None
    library = where.rsplit(":", 1)[0] if source else where
    return Frame(code.function(match["function"]), code.library(library), source)


def _python_state(frames: tuple[Frame, ...]) -> str | None:
    python = next((frame for frame in frames if frame.source is not None), None)
    if python is None:
        return None
    name = python.function or ""
    if python.library in _LOCKS and _PY_WAITS.match(name):
        return "futex"
    if _PY_IO.match(name):
        return "io"
    return None


def _state(active: bool, frames: tuple[Frame, ...]) -> str:
    native = state_of(frames) if frames and frames[0].source is None else "running"
    if any(sampled.is_yield(frame) for frame in frames[:3]):
        return "yield"
    if native in ("yield", "futex", "io", "sleep"):
        return native
    if active:
        return "running"
    return _python_state(frames) or "idle"


def _threads(text: str) -> tuple[list[tuple[str, str | None, bool, list[Frame]]], int, int]:
    rows = [row for line in lines(text) if (row := " ".join(unquoted(line.text).split()))]
    threads: list[tuple[str, str | None, bool, list[Frame]]] = []
    skipped = cut = 0
    for index, row in enumerate(rows):
        if (header := _THREAD.match(row)) is not None:
            threads.append((header["id"], header["name"], "active" in header["status"], []))
        elif threads and (frame := _frame(row)) is not None:
            threads[-1][3].append(frame)
        elif threads and index == len(rows) - 1:
            cut += 1  # the paste ends inside a frame
        else:
            skipped += 1
    return threads, skipped, cut


def looks_like(text: str) -> bool:
    """True when *text* has a ``Thread 0x... (idle): "name"`` line of py-spy dump."""
    return any(_THREAD.match(" ".join(unquoted(line.text).split())) for line in lines(text))


def looks_like_error(text: str) -> bool:
    """py-spy's failures to read a process (permission, not a Python process)."""
    first = next((unquoted(line.text) for line in lines(text) if line.text.strip()), "")
    return first.startswith(("Error: Failed to find python version", "Error: Permission Denied", "Error: No such"))


def parse(text: str) -> PySpyDump:
    """The threads in *text*; raises NotThisFormat or CommandFailed (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, 'no `Thread 0x7F... (idle): "MainThread"` line')
    found, skipped, cut = _threads(text)
    threads = tuple(
        PyThread(ident, name, active, tuple(frames), _state(active, tuple(frames)))
        for ident, name, active, frames in found
    )
    return PySpyDump(threads, skipped, cut)


def _skip(frame: Frame) -> bool:
    return bool(_INTERPRETER.match(frame.library)) or frame.library in _LOCKS


def _caller(thread: PyThread) -> tuple[str, str | None]:
    return sampled.caller(thread.frames, -1, _skip)


def to_facts(dump: PySpyDump, source: str) -> Part:
    """The callers of sched_yield and futex waits, and the running threads' innermost frames."""
    samples, running = moment.running_code(dump.threads)
    told = moment.states_told(dump.threads)
    notes = [
        f"{source}: {len(dump.threads)} Python threads ({told}): one moment, not a profile; native threads (a BLAS "
        "or OpenMP pool's) are not in a py-spy dump"
    ]
    notes += read_past(
        source,
        (dump.cut, "frame line(s) cut short were skipped"),
        (dump.skipped, "lines that are not threads or frames (prompts, locals) skipped"),
    )
    workload = WorkloadView(
        ref=Workload(),
        cpu_samples=samples,
        cpu_samples_total=running,
        yield_sites=moment.callers(dump.threads, "yield", _caller),
        futex_sites=moment.callers(dump.threads, "futex", _caller),
        stacks=stack_classes.classify(
            (stack_classes.Counted(thread.frames, 1.0, index) for index, thread in enumerate(dump.threads)), "threads"
        ),
    )
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
