"""Thread stacks: gdb's ``thread apply all bt`` (also ``gstack`` / ``pstack``, which print the same) and the frames
glibc's ``backtrace_symbols`` prints (``lib.so(function+0xOFF) [0xADDR]``, as profilers and crash handlers list
them), and a thread's kernel stack from ``/proc/PID/stack`` (``[<0>] futex_wait+0x9a/0x150``), pasted with ``> ``
quotes, ``[...]`` elisions and wrapped argument lines. From a public thread (OpenMathLib/OpenBLAS#4496, frames cut
here)::

     > /usr/lib/x86_64-linux-gnu/libc-2.31.so(__sched_yield+0x7) [0xe14e7]
     > [...]/openblas/linux-x86_64/libopenblas_nolapack.so.0(sgemm_thread_nt+0xe35) [0x1f4c75]
     > [...]/openblas/linux-x86_64/libopenblas_nolapack.so.0(exec_blas+0xce) [0x348e8e]

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> stack = report.stacks[0]
>>> (len(report.stacks), stack.frames[0].function, stack.frames[1].library, stack.state)
(1, '__sched_yield', 'libopenblas_nolapack.so.0', 'yield')

Each stack, innermost frame first, is in a state read from where it stands: in ``sched_yield`` (``yield``), in a
futex wait (``futex``: condition variables, mutexes, semaphores, joins, C++ atomic waits), in I/O or a sleep, or
``running`` (any other code: on a CPU or runnable when the dump was taken).

Facts (:func:`to_facts`): the threads dumped; the call sites of sched_yield and of futex waits (``yield_sites``,
``futex_sites``: the first frame outside the C library that called, one per stack); the running stacks' innermost
frames as on-CPU samples (``cpu_samples``, one per thread: a dump is one moment, not a profile).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, moment, stack_classes
from agent.diagnosis.inputs.artifacts.damage import read_past
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.frames import FUTEX, KERNEL_IO, PROGRAM, Frame, wait_of
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "Frame", "Stack", "StackDump", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "stacks"

_THREAD = re.compile(r"^Thread (?P<number>\d+) \((?:Thread 0x[0-9a-fA-F]+ |Thread \d+ )?\(?LWP (?P<lwp>\d+)\)")
_SWITCHING = re.compile(r"^\[Switching to thread (?P<number>\d+) \((?:Thread 0x[0-9a-fA-F]+ )?\(?LWP (?P<lwp>\d+)\)")
_GDB_FRAME = re.compile(r"^#(?P<index>\d+)\s+(?:0x[0-9a-fA-F]+ in (?P<rest>\S.*)|(?P<named>[^\s(]+ \(.*))$")
_GLIBC_FRAME = re.compile(r"^(?P<path>\S*?)\((?P<function>[^()+\s]*)(?:\+0x[0-9a-fA-F]+)?\)\s*\[0x[0-9a-fA-F]+\]$")
_KERNEL_FRAME = re.compile(r"^\[<[0-9a-fA-F]+>\] (?P<function>[\w.]+)\+0x[0-9a-fA-F]+/0x[0-9a-fA-F]+$")
_BARE_FRAME = re.compile(r"^(?P<function>[A-Za-z_][\w:.<>~]*)\s+\[0x[0-9a-fA-F]+\]$")
_FROM = re.compile(r"\s+from\s+(?P<library>\S+)$")
_AT = re.compile(r"\s+at\s+(?P<source>\S+?)(?::\d+)?$")
_ELISION = re.compile(r"^(?:\[\.\.\.\]|\.\.\.|…)$")


@dataclass(frozen=True)
class Stack:
    """One thread's stack (innermost first), its thread where gdb names it, and where it stands."""

    frames: tuple[Frame, ...]
    thread: int | None = None  # gdb's LWP: the thread id
    state: str = "running"  # "yield", "futex", "io", "sleep", "running"

    def caller(self) -> Frame | None:
        """The first frame outside the C library and the kernel, below the innermost (who made the call)."""
        return next((frame for frame in self.frames[1:] if not frame.in_libc and frame.library != code.KERNEL), None)


@dataclass(frozen=True)
class StackDump:
    """The stacks of one dump or paste, and the lines read past (prompts, prose, source lines, elisions)."""

    stacks: tuple[Stack, ...]
    skipped: int
    elisions: int


def _unquoted(text: str) -> str:
    return unquoted(text).strip("`").strip()


def _function_of(rest: str) -> str:
    depth = 0
    for index, char in enumerate(rest):
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif char == "(" and depth == 0:
            return rest[:index].strip()
    return rest.split()[0]


def frame_of_gdb(rest: str) -> Frame:
    """A gdb frame line past its number and address (``f (args) from LIB``, ``f (args) at FILE:LINE``)."""
    library = _FROM.search(rest)
    source = _AT.search(rest)
    name = _function_of(rest)
    return Frame(
        None if name == "??" else name,
        code.library(library["library"]) if library else PROGRAM,
        source["source"] if source and not library else None,
    )


def _frame(text: str) -> tuple[Frame, int | None] | None:
    """A frame of *text* and its gdb index (None for glibc's frames), or None."""
    if (gdb := _GDB_FRAME.match(text)) is not None:
        return frame_of_gdb(gdb["rest"] or gdb["named"]), int(gdb["index"])
    if (glibc := _GLIBC_FRAME.match(text)) is not None:
        return Frame(code.function(glibc["function"]), code.library(glibc["path"] or None)), None
    if (kernel := _KERNEL_FRAME.match(text)) is not None:
        return Frame(kernel["function"], code.KERNEL), None
    if (bare := _BARE_FRAME.match(text)) is not None:
        return Frame(bare["function"], code.UNKNOWN), None
    return None


def state_of(frames: tuple[Frame, ...]) -> str:
    """Where a stack (innermost frame first) stands: in sched_yield, a futex wait, I/O, a sleep, or running."""
    for frame in frames[:3]:  # the call wrappers sit on top
        name = frame.function or ""
        wait = wait_of(name) or ("io" if frame.library == code.KERNEL and KERNEL_IO.search(name) else None)
        if wait is not None:
            return wait
        if not frame.in_libc and name != "syscall":
            break
    first = frames[0].function if frames else None
    return "futex" if first == "syscall" and len(frames) > 1 and FUTEX.search(frames[1].function or "") else "running"


_CONTINUED = re.compile(r"^(?:from|at) \S")  # gdb wraps a long frame before its `from LIB` or `at FILE:LINE`


def _rows(text: str) -> list[str]:
    """The pasted lines unquoted, a frame gdb wrapped before its ``from``/``at`` part joined again."""
    rows: list[str] = []
    for line in lines(text):
        clean = _unquoted(line.text)
        if rows and _CONTINUED.match(clean) and _GDB_FRAME.match(rows[-1]):
            rows[-1] = f"{rows[-1]} {clean}"
        else:
            rows.append(clean)
    return rows


def _looks(text: str) -> int:
    return sum(1 for row in _rows(text) if _frame(row) is not None)


def looks_like(text: str) -> bool:
    """True when *text* holds at least two stack frames (``#0  0x... in f () from lib``, ``lib.so(f+0x1) [0x2]``)."""
    return _looks(text) >= 2


def looks_like_error(text: str) -> bool:
    """gdb's failure to attach."""
    return any(_unquoted(line.text).startswith("ptrace: Operation not permitted") for line in lines(text)) and (
        not looks_like(text)
    )


def parse(text: str) -> StackDump:
    """The stacks in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "fewer than two stack frames (`#0  0x... in f () from lib`, `lib.so(f+0x1) [0x2]`)")
    stacks: list[Stack] = []
    current: list[Frame] = []
    thread: int | None = None
    skipped = elisions = 0

    def close() -> None:
        nonlocal current
        if current:
            frames = tuple(current)
            last = stacks[-1] if stacks else None
            if (
                last is not None
                and thread is not None
                and last.thread == thread
                and (last.frames[0].function == frames[0].function)
            ):
                # gdb prints a thread's top frame when it switches to it, then `bt` the whole stack (or a `bt`
                # is repeated): one thread, one stack, the longer
                if len(frames) > len(last.frames):
                    stacks[-1] = Stack(frames, thread, state_of(frames))
            else:
                stacks.append(Stack(frames, thread, state_of(frames)))
        current = []

    for clean in _rows(text):
        if not clean:
            if current and thread is None:
                close()  # glibc frames: a blank line ends a stack
            continue
        if (header := _THREAD.match(clean) or _SWITCHING.match(clean)) is not None:
            close()
            thread = int(header["lwp"])
            continue
        if _ELISION.match(clean):
            elisions += 1
            continue
        found = _frame(clean)
        if found is None:
            skipped += 1
            continue
        frame, index = found
        if index == 0:
            close()
        current.append(frame)
    close()
    if not stacks:
        raise NotThisFormat(FORMAT, "no stack frames (`#0  0x... in f () from lib`, `lib.so(f+0x1) [0x2]`)")
    return StackDump(tuple(stacks), skipped, elisions)


def _caller(stack: Stack) -> tuple[str, str | None]:
    caller = stack.caller()
    return (caller.library, caller.function) if caller is not None else (code.UNKNOWN, None)


def to_facts(dump: StackDump, source: str) -> Part:
    """Threads, the call sites of sched_yield and futex waits, and the running threads' innermost code."""
    samples, running = moment.running_code(dump.stacks)
    told = moment.states_told(dump.stacks)
    notes = [
        f"{source}: {len(dump.stacks)} stacks ({told}): one moment, not a profile; how long each waited is unknown"
    ]
    notes += read_past(
        source,
        (dump.elisions, "elided part(s) (`[...]`) of the stacks were read past"),
        (dump.skipped, "lines that are not frames (prose, source lines, arguments) skipped"),
    )
    threaded = all(stack.thread is not None for stack in dump.stacks)
    workload = WorkloadView(
        ref=Workload(),
        threads=len(dump.stacks) if threaded else None,
        cpu_samples=samples,
        cpu_samples_total=running,
        yield_sites=moment.callers(dump.stacks, "yield", _caller),
        futex_sites=moment.callers(dump.stacks, "futex", _caller),
        stacks=stack_classes.classify(
            (stack_classes.Counted(stack.frames, 1.0, stack.thread) for stack in dump.stacks),
            "threads" if threaded else "stacks",
        ),
    )
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
