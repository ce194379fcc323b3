"""bpftrace's maps as it prints them on exit: ``@name[key, key]: count`` lines and stack keys over several lines
(``@[`` then the frames, ``,`` between stacks, ``]: count``), frames as ``func+off`` or, with ``ustack(perf)``,
``addr func+off (lib.so)``. The ``bpftrace -e '...'`` command, when pasted, says what was counted (a profile, a
system call's entries); histograms, bpftrace's own messages and a map cut short are read past. Recorded here (see
the fixtures' README), one key shown::

    @[yielder]: 2000

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> entry = report.entries[0]
>>> (entry.scalars, entry.count, report.probes)
(('yielder',), 2000, ())

Facts (:func:`to_facts`): of a ``profile:`` probe's stack maps, the innermost frames as on-CPU samples and the
callers of sched_yield and futex waits; of ``sched_yield``/``futex`` entry probes' stack maps, the callers of those
calls. Maps by command or process are listed in a note: a map is the whole machine's unless the script filtered it,
and it says nothing of threads or time. Without the command, only stacks that all end in sched_yield or a futex
call are read. bpftrace prints a user frame's library only with ``ustack(perf)``; without it the caller's library
is unknown and is not named.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, sampled, stack_classes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "BpftraceMaps", "MapEntry", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "bpftrace maps"

_ONE_LINE = re.compile(r"^@(?P<name>\w*)(?:\[(?P<key>.*)\])?: (?P<count>\d+)$")
_OPEN = re.compile(r"^@(?P<name>\w*)\[(?P<key>[^\]]*)$")
_CLOSE = re.compile(r"^(?P<last>.*?)\]: (?P<count>\d+)$")
_PERF_FRAME = re.compile(r"^(?P<address>[0-9a-fA-F]+) (?P<symbol>\S+) \((?P<dso>[^()]*)\)$")
_SYMBOL_FRAME = re.compile(r"^(?P<symbol>[^\s,]+)$")
_COMMAND = re.compile(r"bpftrace\b.*?-e\s*['\"](?P<script>.*)")
_PROBE = re.compile(r"(?:^|[\s;}'\"])(?P<probe>(?:tracepoint|t|kprobe|k|kretprobe|uprobe|u|profile|p|kfunc|fentry|"
                    r"rawtracepoint|software|hardware|usdt):[^\s{/]+)")  # fmt: skip
_KERNEL_NAMES = re.compile(r"^(?:entry_SYSCALL|do_syscall_64|__x64_sys_|__se_sys_|syscall_trace_enter|"
                           r"perf_syscall_enter|el0_svc|ret_from_fork|kthread$|__schedule|schedule$)")  # fmt: skip
KERNEL_SPACE = 0xFFFF800000000000


@dataclass(frozen=True)
class MapEntry:
    """One key of a map: its map's name, its scalar keys (comm, pid, ...), its stacks (innermost first), its count."""

    map: str
    scalars: tuple[str, ...]
    stacks: tuple[tuple[Frame, ...], ...]
    count: int


@dataclass(frozen=True)
class BpftraceMaps:
    """The map entries of one run, the probes of its pasted command, and what was read past."""

    entries: tuple[MapEntry, ...]
    probes: tuple[str, ...]  # from the pasted ``bpftrace -e '...'``; () when it was not pasted
    skipped: int
    cut: int  # a stack key without its count (the paste ends inside it)


def _rows(text: str) -> list[str]:
    return [" ".join(unquoted(line.text).split()) for line in lines(text)]


def _probes(rows: list[str]) -> tuple[str, ...]:
    found: list[str] = []
    for row in rows:
        if (command := _COMMAND.search(row)) is not None:
            found.extend(match["probe"] for match in _PROBE.finditer(" " + command["script"]))
    return tuple(probe for probe in found if not probe.startswith(("interval:", "i:")))


def looks_like(text: str) -> bool:
    """True when *text* has bpftrace map lines (``@[comm]: 12``, or a stack key closed by ``]: 12``)."""
    rows = _rows(text)
    return any(_ONE_LINE.match(row) for row in rows) or (
        any(_OPEN.match(row) for row in rows) and any(_CLOSE.match(row) for row in rows)
    )


def looks_like_error(text: str) -> bool:
    """bpftrace's failures to attach or compile (``ERROR: ...`` without any map)."""
    rows = _rows(text)
    return any(row.startswith(("ERROR: ", "stdin:1:")) for row in rows) and not looks_like(text)


def _frame(text: str) -> tuple[Frame, bool | None] | None:
    """A frame and whether it is the kernel's (None: not told by the frame itself); None for an elision."""
    if text in ("[...]", "...", "…"):
        return None
    if (perf := _PERF_FRAME.match(text)) is not None:
        kernel = code.is_kernel(perf["dso"]) or int(perf["address"], 16) >= KERNEL_SPACE
        library = code.KERNEL if kernel else code.library(perf["dso"])
        return Frame(code.function(re.sub(r"\+\d+$", "", perf["symbol"])), library), kernel
    if (plain := _SYMBOL_FRAME.match(text)) is not None:
        symbol = plain["symbol"]
        if symbol.startswith("0x"):
            kernel = int(symbol, 16) >= KERNEL_SPACE
            return Frame(None, code.KERNEL if kernel else code.UNKNOWN), kernel
        return Frame(code.function(re.sub(r"\+\d+$", "", symbol)), code.UNKNOWN), None
    return None


def _stack(rows: list[str]) -> tuple[Frame, ...]:
    """One stack component: frames whose side the frames do not tell are the kernel's when the stack holds a kernel
    entry or scheduler frame (a ``kstack``), else the user's."""
    frames = [found for row in rows if (found := _frame(row)) is not None]
    kernel_stack = any(side for _, side in frames) or any(
        _KERNEL_NAMES.match(frame.function or "") for frame, side in frames if side is None
    )
    return tuple(
        Frame(frame.function, code.KERNEL) if side is None and kernel_stack else frame for frame, side in frames
    )


def _entry(name: str, first: str, body: list[str], last: str, count: int) -> MapEntry:
    """A multi-line key: scalar keys on the first line, then stacks separated by lines that are only a comma."""
    scalars = tuple(part.strip() for part in first.split(",") if part.strip())
    components: list[list[str]] = [[]]
    for row in [*body, last]:
        if row.strip() in (",", ""):
            if row.strip() == ",":
                components.append([])
            continue
        components[-1].append(row)
    stacks = tuple(_stack(component) for component in components)
    return MapEntry(name, scalars, stacks, count)


def parse(text: str) -> BpftraceMaps:
    """The map entries in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `@[key]: count` map lines")
    rows = _rows(text)
    entries: list[MapEntry] = []
    open_key: tuple[str, str, list[str]] | None = None
    skipped = 0
    for row in rows:
        if not row:
            continue
        if open_key is not None:
            if (close := _CLOSE.match(row)) is not None:
                name, first, body = open_key
                entries.append(_entry(name, first, body, close["last"], int(close["count"])))
                open_key = None
            else:
                open_key[2].append(row)
        elif (one := _ONE_LINE.match(row)) is not None:
            scalars = tuple(part.strip() for part in (one["key"] or "").split(",") if part.strip())
            entries.append(MapEntry(one["name"], scalars, (), int(one["count"])))
        elif (opened := _OPEN.match(row)) is not None:
            open_key = (opened["name"], opened["key"], [])
        else:
            skipped += 1
    return BpftraceMaps(tuple(entries), _probes(rows), skipped, 1 if open_key is not None else 0)


def _call(probes: tuple[str, ...]) -> str | None:
    joined = " ".join(probes)
    if "sched_yield" in joined:
        return "sched_yield"
    if "futex" in joined:
        return "futex"
    return None


def _innermost(entry: MapEntry) -> tuple[Frame, ...]:
    """The frames of an entry's stacks, innermost first: a kernel stack sits above the user stack that called in."""
    kernel = [stack for stack in entry.stacks if stack and stack[0].library == code.KERNEL]
    user = [stack for stack in entry.stacks if stack and stack[0].library != code.KERNEL]
    return tuple(frame for stack in (*kernel, *user) for frame in stack)


def to_facts(report: BpftraceMaps, source: str) -> Part:
    """On-CPU samples of a profile's stack maps; call sites of sched_yield/futex probes' stack maps."""
    stacked = [sampled.Counted(frames, float(entry.count)) for entry in report.entries if (frames := _innermost(entry))]
    profile = any(probe.startswith(("profile:", "p:", "software:cpu", "hardware:")) for probe in report.probes)
    call = _call(report.probes)
    if (
        call is None
        and not report.probes
        and stacked
        and all(any(sampled.is_yield(frame) for frame in stack.frames) for stack in stacked)
    ):
        call = "sched_yield"
    notes = [f"{source}: {len(report.entries)} map entries"
             + (f" of {', '.join(report.probes)}" if report.probes else " (the command that made them was not pasted)")
             + "; how long bpftrace ran is not in them"]  # fmt: skip
    workload = None
    if stacked and profile:
        yield_sites, futex_sites = sampled.call_sites(stacked)
        total = float(sum(entry.count for entry in report.entries if any(entry.stacks)))
        workload = WorkloadView(ref=Workload(), cpu_samples=sampled.leaf_samples(stacked), cpu_samples_total=total,
                                yield_sites=yield_sites, futex_sites=futex_sites)  # fmt: skip
    elif stacked and call is not None:
        is_call = sampled.is_yield if call == "sched_yield" else sampled.is_futex
        sites = sampled.sites_of_call(stacked, is_call)
        workload = WorkloadView(ref=Workload(), yield_sites=sites if call == "sched_yield" else None,
                                futex_sites=sites if call == "futex" else None)  # fmt: skip
    if workload is not None:
        unit = "samples" if profile else "calls"
        classified = stack_classes.classify((stack_classes.Counted(s.frames, s.weight) for s in stacked), unit)
        workload = dataclasses.replace(workload, stacks=classified)
    keyed = [entry for entry in report.entries if entry.scalars and not any(entry.stacks)]
    if keyed:
        busiest = sorted(keyed, key=lambda entry: -entry.count)[:5]
        shown = ", ".join(f"{' '.join(entry.scalars)} {entry.count}" for entry in busiest)
        notes.append(f"{source}: counts by key (busiest: {shown}): the whole machine's unless the script filtered")
    if report.cut:
        notes.append(f"{source}: a map entry cut short before its count was skipped")
    if report.skipped:
        notes.append(f"{source}: {report.skipped} lines of bpftrace's messages, histograms and prompts skipped")
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
