"""``perf script``: the samples or events of a ``perf record``, one header line each (``comm pid [cpu] time: period
event:``), with the sampled instruction on that line or, with call chains (``-g``), one frame a line below it
(``addr symbol+off (dso)``), a blank line after each. Prompts, lines of other output, a frame wrapped onto the next
line and a sample cut short are read past; a prefix every line carries (a CI log's time stamp) is removed. From a
public thread (thlorenz/cpuprofilify#2, samples cut here)::

    node 18077 135159.686344:      12387 cycles:u:
        ffffffff8174ec00 page_fault ([kernel.kallsyms])
              3811a011f0 _start (/usr/lib64/ld-2.18.so)

    node 18077 135159.686370:     144643 cycles:u:
              3811a022ea dl_main (/usr/lib64/ld-2.18.so)

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> script = parse(docstring_sample(__doc__))
>>> sample = script.samples[0]
>>> (sample.comm, sample.tid, sample.event, sample.frames[0].function, sample.frames[1].library)
('node', 18077, 'cycles:u', 'page_fault', 'ld-2.18.so')

Facts (:func:`to_facts`): of sampling events (cycles, cpu-clock, ...) the innermost frames as on-CPU samples (one
per sample: perf report weighs by period instead) and the callers of sched_yield and futex waits in the call chains;
of the ``sched_yield``/``futex`` system-call tracepoints (``syscalls:sys_enter_sched_yield``, ``raw_syscalls`` with
``NR 24``/``NR 202``) the calls per thread and their call sites. Other tracepoints are listed in a note only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, sampled, stack_classes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "PerfScript", "Sample", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "perf script"

_TIME = re.compile(r"\s(?P<time>\d+\.\d+):(?=\s|$)")
_EVENT = re.compile(r"^(?:(?P<period>\d+)\s+)?(?P<event>[\w.\-/]+(?::[\w.\-/]+)*?):(?:\s+(?P<rest>.*))?$")
_MODIFIERS = re.compile(r"^[ukhHGpPSDIWe]+$")
_FRAME = re.compile(r"^(?P<address>[0-9a-fA-F]+)\s+(?P<symbol>.+?)\s+\((?P<dso>[^()]*)\)$")
_LOG_PREFIX = re.compile(r"^\d{1,2}:\d\d:\d\d(?:\.\d+)?(?:\s+|$)")
_NR = re.compile(r"\bNR (?P<nr>\d+)\b")
YIELD_EVENTS = frozenset({"syscalls:sys_enter_sched_yield"})
FUTEX_EVENTS = frozenset(
    {"syscalls:sys_enter_futex", "syscalls:sys_enter_futex_wait", "syscalls:sys_enter_futex_waitv"}
)
INLINED = "inlined"  # perf's dso of an inlined frame
X86_64_NR = {"24": "sched_yield", "202": "futex"}  # raw_syscalls:sys_enter's NR on x86_64


@dataclass(frozen=True)
class Sample:
    """One sample or event: who, the event, and its stack (innermost first; one frame without call chains)."""

    comm: str
    pid: int | None  # printed only with -F pid (``pid/tid``)
    tid: int  # perf script's default number is the thread's
    event: str  # "cycles:u", "cpu-clock", "syscalls:sys_enter_futex", ...
    frames: tuple[Frame, ...]
    detail: str | None  # a tracepoint's printed fields


@dataclass(frozen=True)
class PerfScript:
    """The samples of a paste, and what was read past."""

    samples: tuple[Sample, ...]
    skipped: int  # prompts, other output, frames wrapped or cut


def is_sampling(event: str) -> bool:
    """A sampling event (cycles, cpu-clock, ...; with modifiers ``:u``, ``:ppp``), not a tracepoint."""
    _base, _, modifiers = event.partition(":")
    return not modifiers or (bool(_MODIFIERS.match(modifiers)) and ":" not in modifiers)


def _header(text: str) -> tuple[str, int | None, int, str, str | None] | None:
    """(comm, pid, tid, event, the rest of the line) of a sample's header line, or None."""
    when = _TIME.search(text)
    if when is None:
        return None
    left = text[: when.start()].split()
    if left and left[-1].startswith("[") and left[-1].endswith("]"):
        left = left[:-1]  # the CPU
    if len(left) < 2:
        return None
    first, _, second = left[-1].partition("/")
    if not first.isdigit() or (second and not second.isdigit()):
        return None
    event = _EVENT.match(text[when.end() :].strip())
    if event is None:
        return None
    pid, tid = (int(first), int(second)) if second else (None, int(first))
    return " ".join(left[:-1]), pid, tid, event["event"], event["rest"] or None


def _frame(text: str) -> tuple[Frame, str] | None:
    """A frame line's frame and address."""
    match = _FRAME.match(text)
    if match is None:
        return None
    dso = match["dso"]
    library = code.KERNEL if code.is_kernel(dso) else INLINED if dso == INLINED else code.library(dso)
    return Frame(code.function(match["symbol"]), library), match["address"].lower()


def _inlined_in_place(frames: list[tuple[Frame, str]]) -> tuple[Frame, ...]:
    """Frames perf marks ``(inlined)`` are in the library of the frame at the same address; unknown without one."""
    libraries = {address: frame.library for frame, address in frames if frame.library != INLINED}
    return tuple(
        Frame(frame.function, libraries.get(address, code.UNKNOWN)) if frame.library == INLINED else frame
        for frame, address in frames
    )


def _rows(text: str) -> list[str]:
    rows = [unquoted(line.text) for line in lines(text)]
    present = [row for row in rows if row]
    if present and all(_LOG_PREFIX.match(row) for row in present):
        rows = [_LOG_PREFIX.sub("", row) if row else row for row in rows]
    return [" ".join(row.split()) for row in rows]


def looks_like(text: str) -> bool:
    """True when *text* has two or more sample header lines (``comm pid [cpu] time: period event:``)."""
    return sum(1 for row in _rows(text) if row and _header(row) is not None) >= 2


def looks_like_error(text: str) -> bool:
    """perf's failure to read its data file."""
    first = next((row for row in _rows(text) if row), "")
    return first.startswith(("failed to open perf.data", "incompatible file format", "file perf.data not owned"))


def parse(text: str) -> PerfScript:
    """The samples in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `comm pid [cpu] time: period event:` sample lines")
    found: list[tuple[tuple[str, int | None, int, str, str | None], list[tuple[Frame, str]]]] = []
    skipped = 0
    for row in _rows(text):
        if not row:
            continue
        if (header := _header(row)) is not None:
            comm, pid, tid, event, rest = header
            inline = _frame(rest) if rest else None
            found.append(((comm, pid, tid, event, None if inline else rest), [inline] if inline else []))
        elif found and (frame := _frame(row)) is not None:
            found[-1][1].append(frame)
        else:
            skipped += 1
    samples = tuple(
        Sample(comm, pid, tid, event, _inlined_in_place(frames), detail)
        for (comm, pid, tid, event, detail), frames in found
    )
    return PerfScript(samples, skipped)


def _call(sample: Sample) -> str | None:
    """``sched_yield`` or ``futex`` when *sample* is an entry into that system call, else None."""
    if sample.event in YIELD_EVENTS:
        return "sched_yield"
    if sample.event in FUTEX_EVENTS:
        return "futex"
    if sample.event == "raw_syscalls:sys_enter" and sample.detail and (nr := _NR.search(sample.detail)):
        return X86_64_NR.get(nr["nr"])
    return None


def _threads(samples: list[Sample], call: str) -> list[ThreadView]:
    counted: dict[tuple[int, str], tuple[int | None, int]] = {}
    for sample in samples:
        pid, calls = counted.get((sample.tid, sample.comm), (sample.pid, 0))
        counted[(sample.tid, sample.comm)] = (pid, calls + 1)
    if call == "sched_yield":
        return [ThreadView(tid, comm, pid, sched_yield_calls=calls) for (tid, comm), (pid, calls) in counted.items()]
    return [ThreadView(tid, comm, pid, futex_calls=calls) for (tid, comm), (pid, calls) in counted.items()]


def to_facts(script: PerfScript, source: str) -> Part:
    """On-CPU samples and call sites of the sampling events; calls and their sites of the yield/futex tracepoints."""
    sampling = [sample for sample in script.samples if is_sampling(sample.event)]
    stacks = [sampled.Counted(sample.frames, 1.0) for sample in sampling if sample.frames]
    yield_sites, futex_sites = sampled.call_sites(stacks)
    calls = {"sched_yield": [s for s in script.samples if _call(s) == "sched_yield"],
             "futex": [s for s in script.samples if _call(s) == "futex"]}  # fmt: skip
    if calls["sched_yield"]:
        yield_sites = sampled.sites_of_call([sampled.Counted(s.frames, 1.0) for s in calls["sched_yield"]],
                                            sampled.is_yield)  # fmt: skip
    if calls["futex"]:
        futex_sites = sampled.sites_of_call([sampled.Counted(s.frames, 1.0) for s in calls["futex"]],
                                            sampled.is_futex)  # fmt: skip
    threads = [view for call, samples in calls.items() if samples for view in _threads(samples, call)]
    events = sorted({sample.event for sample in script.samples})
    notes = [f"{source}: {len(script.samples)} samples or events ({', '.join(events)}); how long perf recorded is "
             "not in them"]  # fmt: skip
    others = [event for event in events if not is_sampling(event) and event not in YIELD_EVENTS | FUTEX_EVENTS]
    if others:
        notes.append(
            f"{source}: tracepoints other than sched_yield and futex entries are not read: {', '.join(others)}"
        )
    if sampling and not stacks:
        notes.append(f"{source}: the samples carry no frames (no symbols or call chains recorded)")
    if script.skipped:
        notes.append(
            f"{source}: {script.skipped} lines that are not samples or frames (prompts, wrapped or cut) skipped"
        )
    traced = calls["sched_yield"] + calls["futex"]
    chosen, unit = (traced, "calls") if traced and not sampling else (sampling, "samples")
    classified = stack_classes.classify((stack_classes.Counted(s.frames, 1.0, s.tid) for s in chosen), unit)
    workload = WorkloadView(
        ref=Workload(),
        stacks=classified,
        sched_yield_calls=float(len(calls["sched_yield"])) if calls["sched_yield"] else None,
        cpu_samples=sampled.leaf_samples(stacks),
        cpu_samples_total=float(len(sampling)) if stacks else None,  # samples without frames are of unknown code
        yield_sites=yield_sites,
        futex_sites=futex_sites,
        thread_views=tuple(threads) or None,
    )
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes),
                untimed_counts=bool(threads))  # fmt: skip
