"""``top`` output: batch mode (``top -b``), interactive screens pasted with their colour escapes, and the
thread view (``top -H``, whose summary says ``Threads:``). Every refresh becomes one snapshot.

Read: the first line (time, uptime, users, load average), ``Tasks:``/``Threads:``, the CPU line (procps-ng's
``%Cpu(s): 52.0 us, ...`` and procps 3's ``Cpu(s): 52.0%us, ...``, and per-CPU lines), and the rows under the
column header, whatever columns were chosen (the last, COMMAND, may hold spaces). Memory lines are skipped. A
sample, the seed case's ``top`` on the GCP VM (as posted, whitespace collapsed; rows cut here)::

    top - 11:09:17 up 3 min, 1 user, load average: 35.10, 12.57, 4.53
    Tasks: 337 total, 15 running, 322 sleeping, 0 stopped, 0 zombie
    %Cpu(s): 52.0 us, 43.1 sy, 0.0 ni, 4.9 id, 0.0 wa, 0.0 hi, 0.0 si, 0.0 st
    GiB Mem : 28.1 total, 24.3 free, 3.3 used, 0.6 buff/cache
    GiB Swap: 0.0 total, 0.0 free, 0.0 used. 24.5 avail Mem
    PID USER PR NI VIRT RES SHR S %CPU %MEM TIME+ COMMAND
    2501 root 20 0 2955128 169656 7612 R 380.5 0.6 3:24.55 python
    2502 root 20 0 2959472 176016 7612 R 307.6 0.6 3:17.58 python

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> snapshot = parse(docstring_sample(__doc__)).snapshots[0]
>>> snapshot.load_average, snapshot.tasks.running, snapshot.cpu.sy
((35.1, 12.57, 4.53), 15, 43.1)
>>> snapshot.rows[0]
TopRow(pid=2501, user='root', state='R', cpu_percent=380.5, mem_percent=0.6, time='3:24.55', command='python')

Facts (:func:`to_facts`): the node's CPU states, load and running tasks, and the rows shown (processes, or
threads with ``top -H``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

from agent.diagnosis.facts import CpuShares, NodeView, ProcessView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import table
from agent.diagnosis.inputs.artifacts.damage import Damage, read_rows
from agent.diagnosis.inputs.artifacts.damage import notes as damage_notes
from agent.diagnosis.inputs.artifacts.errors import Malformed
from agent.diagnosis.inputs.artifacts.opening import is_error_message, report_lines
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import Line, decimal, lines, trimmed

__all__ = [
    "FORMAT",
    "CpuStates",
    "TaskCounts",
    "TopReport",
    "TopRow",
    "TopSnapshot",
    "looks_like",
    "looks_like_error",
    "parse",
    "to_facts",
]

FORMAT = "top"


# --- the records: what the tool printed, nothing inferred -----------------------------------------


@dataclass(frozen=True)
class CpuStates:
    """CPU time shares in percent, as ``top`` prints them (``52.0 us, 43.1 sy, ...``); absent states are None."""

    us: float | None
    sy: float | None
    ni: float | None
    id: float | None
    wa: float | None
    hi: float | None
    si: float | None
    st: float | None


@dataclass(frozen=True)
class TaskCounts:
    """``Tasks:`` (or, with ``top -H``, ``Threads:``) line of ``top``; counts it does not print are None.

    Newer procps-ng splits sleeping tasks into ``sleep`` and ``d-sleep`` (uninterruptible).
    """

    total: int
    running: int
    sleeping: int | None
    stopped: int | None
    zombie: int | None
    d_sleep: int | None = None


@dataclass(frozen=True)
class TopRow:
    """One process (or, with ``top -H``, thread) row. *pid* is the thread id in the thread view."""

    pid: int
    user: str | None
    state: str | None
    cpu_percent: float | None
    mem_percent: float | None
    time: str | None
    command: str | None


@dataclass(frozen=True)
class TopSnapshot:
    """One refresh of ``top``: its summary area and its rows."""

    time: str | None
    uptime: str | None
    users: int | None
    load_average: tuple[float, float, float] | None
    tasks: TaskCounts | None
    threads_view: bool  # "Threads:" instead of "Tasks:": top -H, one row per thread
    cpu: CpuStates | None
    per_cpu: tuple[tuple[str, CpuStates], ...]  # "%Cpu0 : ..." lines when top shows each CPU
    columns: tuple[str, ...]
    rows: tuple[TopRow, ...]


@dataclass(frozen=True)
class TopReport:
    """A ``top`` paste: one snapshot per refresh (``top -b -n 2`` gives two; the second is the one over an interval)."""

    snapshots: tuple[TopSnapshot, ...]
    damage: tuple[Damage, ...] = ()  # process rows cut or garbled: skipped, each named


# --- recognising and parsing ----------------------------------------------------------------------

_FIRST = re.compile(
    r"top - (?P<time>\S+) +up +(?P<uptime>\S.*?),(?: +(?P<users>\d+) users?,)? +load average: "
    r"(?P<l1>\d+[.,]\d+),? +(?P<l5>\d+[.,]\d+),? +(?P<l15>\d+[.,]\d+)"
)
_FIRST_LOOSE = re.compile(r"top - .*load average")
_TASKS = re.compile(r"(?P<kind>Tasks|Threads): *(?P<counts>\d+ total,.*)")
# Each number starts where a run of digits starts: otherwise a long run is retried from every digit (quadratic).
_TASK_COUNT = re.compile(r"(?<!\d)(\d+) +(total|running|sleeping|sleep|d-sleep|stopped|zombie)\b")
_CPU_LINE = re.compile(r"%?(?:Cpu|CPU)(?P<which>\(s\)|\d+) *:(?P<states>.*)")
_STATE = re.compile(r"(?<![\d.,])(\d+(?:[.,]\d+)?)(?: *%)? *(us|sy|ni|id|wa|hi|si|st)\b")
_MEMORY = re.compile(r"[KMGTPE]i?B +\S+ *:|(Mem|Swap) *:")  # the word is translated: "MiB Spch :"
# Column names top translates (German: ZEIT+, BEFEHL); the command is the last column, TIME+ the one ending in "+".
_NOT_COMMAND = frozenset({"PID", "TID", "USER", "PR", "NI", "VIRT", "RES", "SHR", "S", "%CPU", "%MEM", "TIME+", "TIME"})
_ERROR = re.compile(r"top: (?P<message>.+)")


_MISSING = "no 'top - ... load average' line, no Tasks: line, no PID ... %CPU header"


def looks_like(text: str) -> bool:
    """True when *text* holds top's first line, its Tasks/Threads line, or its PID ... %CPU column header."""
    for line in lines(text):
        stripped = line.text.strip()
        if _FIRST_LOOSE.match(stripped) or _TASKS.match(stripped) or _is_header(line):
            return True
    return False


def looks_like_error(text: str) -> bool:
    """True when *text* is top's own error message (``top: failed tty get``)."""
    return is_error_message(text, looks_like, _is_error)


def _is_error(line: str) -> bool:
    return _ERROR.fullmatch(line) is not None


def _opens_screen(line: Line) -> bool:
    stripped = line.text.strip()
    return bool(_FIRST_LOOSE.match(stripped) or _TASKS.match(stripped) or _CPU_LINE.match(stripped)) or _is_header(line)


def _ends_screen(line: Line) -> bool:
    return line.text.lstrip()[:1].isdigit() or _opens_screen(line)  # a process row starts with its PID


def _is_header(line: Line) -> bool:
    fields = line.fields
    return len(fields) >= 3 and fields[0] in ("PID", "TID") and "%CPU" in fields


def parse(text: str) -> TopReport:
    """Every snapshot in *text*; raises NotThisFormat, CommandFailed or Malformed (see .errors)."""
    rows = report_lines(text, FORMAT, looks_like, _is_error, _MISSING)
    rows = trimmed(rows, _opens_screen, _ends_screen)
    starts = [i for i, line in enumerate(rows) if _FIRST_LOOSE.match(line.text.strip())] or [0]
    if starts[0] != 0:
        starts.insert(0, 0)  # a paste that begins below top's first line
    snapshots = []
    damage: list[Damage] = []
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(rows)
        snapshots.append(_snapshot(rows[start:end], damage))
    return TopReport(tuple(snapshot for snapshot in snapshots if snapshot is not None), tuple(damage))


def _snapshot(rows: list[Line], damage: list[Damage]) -> TopSnapshot | None:
    first = cpu = None
    tasks: TaskCounts | None = None
    threads_view = False
    per_cpu: list[tuple[str, CpuStates]] = []
    for index, line in enumerate(rows):
        stripped = line.text.strip()
        if _FIRST_LOOSE.match(stripped):
            first = _FIRST.match(stripped)
            if first is None:
                raise Malformed(FORMAT, line.number, f"top's first line without time, uptime or users: {stripped!r}")
        elif match := _TASKS.match(stripped):
            tasks = _task_counts(line, match.group("counts"))
            threads_view = match.group("kind") == "Threads"
        elif match := _CPU_LINE.match(stripped):
            states = _cpu_states(line, match.group("states"))
            if match.group("which") == "(s)":
                cpu = states
            else:
                per_cpu.append((match.group("which"), states))
        elif _MEMORY.match(stripped):
            continue
        elif _is_header(line):
            columns = tuple(line.fields)
            process_rows = tuple(read_rows(rows[index + 1 :], partial(_row, columns=columns), damage))
            return _made(first, tasks, threads_view, cpu, per_cpu, columns, process_rows)
        else:
            raise Malformed(FORMAT, line.number, f"a line top's summary area does not have: {stripped!r}")
    if first is None and tasks is None:
        return None
    return _made(first, tasks, threads_view, cpu, per_cpu, (), ())


def _made(
    first: re.Match[str] | None,
    tasks: TaskCounts | None,
    threads_view: bool,
    cpu: CpuStates | None,
    per_cpu: list[tuple[str, CpuStates]],
    columns: tuple[str, ...],
    rows: tuple[TopRow, ...],
) -> TopSnapshot:
    return TopSnapshot(
        time=first.group("time") if first else None,
        uptime=first.group("uptime") if first else None,
        users=int(first.group("users")) if first and first.group("users") else None,
        load_average=(decimal(first.group("l1")), decimal(first.group("l5")), decimal(first.group("l15")))
        if first
        else None,
        tasks=tasks,
        threads_view=threads_view,
        cpu=cpu,
        per_cpu=tuple(per_cpu),
        columns=columns,
        rows=rows,
    )


def _task_counts(line: Line, text: str) -> TaskCounts:
    found = {name: int(value) for value, name in _TASK_COUNT.findall(text)}
    if "total" not in found or "running" not in found:
        raise Malformed(FORMAT, line.number, f"a Tasks line without total or running: {line.text.strip()!r}")
    return TaskCounts(
        total=found["total"],
        running=found["running"],
        sleeping=found.get("sleeping", found.get("sleep")),
        stopped=found.get("stopped"),
        zombie=found.get("zombie"),
        d_sleep=found.get("d-sleep"),
    )


def _cpu_states(line: Line, text: str) -> CpuStates:
    found = {name: decimal(value) for value, name in _STATE.findall(text)}
    if not found:
        raise Malformed(FORMAT, line.number, f"a CPU line without us/sy/id values: {line.text.strip()!r}")
    return CpuStates(*(found.get(name) for name in ("us", "sy", "ni", "id", "wa", "hi", "si", "st")))


def _row(line: Line, columns: tuple[str, ...]) -> TopRow:
    has_command = columns[-1] not in _NOT_COMMAND
    fields = table.split_row(line, len(columns), free_last=has_command)
    values = dict(zip(columns, fields, strict=False))  # a screen cut at the terminal's width keeps the left columns
    if "%CPU" not in values:
        raise Malformed(FORMAT, line.number, f"a process row without its %CPU value: {line.text.strip()!r}")
    time_column = next((name for name in columns if name == "TIME" or name.endswith("+")), None)
    return TopRow(
        pid=table.whole(FORMAT, line, columns[0], fields[0]),
        user=values.get("USER"),
        state=values.get("S"),
        cpu_percent=table.number(FORMAT, line, "%CPU", values["%CPU"]),
        mem_percent=table.optional_number(FORMAT, line, "%MEM", values.get("%MEM")),
        time=values.get(time_column) if time_column else None,
        command=values.get(columns[-1]) if has_command else None,
    )


# --- facts: what the records tell the rules -------------------------------------------------------

NO_CAUSE = "top shows where CPU time went, not why: a spinning thread pool and useful work look alike except for sy"
ROWS = "top's rows are what the screen showed (all processes, or those given with -p): not known to be one workload"
FIRST_REFRESH = "top printed one refresh: if it was `top -b -n 1`, its CPU line has no interval behind it"


def cpu_shares(states: CpuStates) -> CpuShares:
    """top's ``us sy ni id wa hi si st`` as the view's shares."""
    return CpuShares(
        user=states.us,
        nice=states.ni,
        system=states.sy,
        idle=states.id,
        iowait=states.wa,
        irq=states.hi,
        softirq=states.si,
        steal=states.st,
    )


def _process(row: TopRow) -> ProcessView:
    return ProcessView(pid=row.pid, comm=row.command, command=row.command, cpu_percent=row.cpu_percent)


def _thread(row: TopRow) -> ThreadView:
    return ThreadView(tid=row.pid, comm=row.command, cpu_percent=row.cpu_percent)


def _node(snapshot: TopSnapshot) -> NodeView:
    return NodeView(
        cpus=len(snapshot.per_cpu) or None,
        cpu=None if snapshot.cpu is None else cpu_shares(snapshot.cpu),
        run_queue=None if snapshot.tasks is None else float(snapshot.tasks.running),
        load_average=snapshot.load_average,
    )


def to_facts(report: TopReport, source: str) -> Part:
    """The last refresh: in batch mode the first has no interval behind it."""
    snapshot = report.snapshots[-1]
    notes = [NO_CAUSE]
    workload: WorkloadView | None = None
    if snapshot.rows:
        notes.append(ROWS)
        if snapshot.threads_view:
            workload = WorkloadView(ref=Workload(), thread_views=tuple(_thread(row) for row in snapshot.rows))
        else:
            workload = WorkloadView(ref=Workload(), processes=tuple(_process(row) for row in snapshot.rows))
    if len(report.snapshots) == 1:
        notes.append(FIRST_REFRESH)
    return Part("top", source, _node(snapshot), workload, (*notes, *damage_notes(source, report.damage)))
