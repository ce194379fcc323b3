"""``perf sched latency`` (a row per task: run time, switches, average and longest delay from waking to running) and
``perf sched timehist`` (a line per switch with the time waited for a CPU, ``sch delay``; with ``-s`` the run-time
summary per task), as printed or pasted. Rules of dashes, the header, prompts, perf's warnings and the ``TOTAL:`` row
are read past; a row cut short is skipped and named (:mod:`.damage`). From a public thread (tikv/tikv#2473, rows cut
here)::

      Task                  |   Runtime ms  | Switches | Average delay ms | Maximum delay ms | Maximum delay at       |
      raftstore-4:82059     |   3568.419 ms |     9713 | avg:    0.025 ms | max:   12.974 ms | max at: 9394868.547878 s
      tidb-ycsb:(63)        |  58661.342 ms |   367843 | avg:    0.028 ms | max:   11.810 ms | max at: 9394867.616867 s

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> [(task.name, task.pid, task.runtime_seconds, task.switches) for task in report.tasks]  # busiest first
[('tidb-ycsb', None, 58.661342, 367843), ('raftstore-4', 82059, 3.568419, 9713)]

Facts (:func:`to_facts`): the node's tasks with their run time and delays (``task_delays``, busiest first) and who
held the CPUs (``cpu_holders``); the rules match the workload's processes to them by pid or name. A trace of the
whole machine: which task is the workload the other files say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, TaskDelay
from agent.diagnosis.inputs.artifacts.damage import Damage, notes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "SchedReport", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "perf sched"

_LATENCY_ROW = re.compile(
    r"^(?P<task>\S.*?)\s*\|\s*(?P<runtime>\d+(?:\.\d+)?) ms\s*\|\s*(?P<switches>\d+)\s*\|\s*"
    r"avg:\s*(?P<avg>\d+(?:\.\d+)?) ms\s*\|\s*max:\s*(?P<max>\d+(?:\.\d+)?) ms"
)
_LATENCY_HEADER = re.compile(r"^Task\s*\|\s*Runtime ms\s*\|\s*Switches\s*\|")
_SUMMARY_ROW = re.compile(
    r"^(?P<comm>\S.*?)\[(?P<tid>\d+)(?:/(?P<pid>\d+))?\]\s+(?P<parent>-?\d+)\s+(?P<count>\d+)\s+(?P<run>\d+\.\d+)\s+"
    r"\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+"
)
_EVENT = re.compile(
    r"^(?P<time>\d+\.\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<comm>\S.*?)\[(?P<tid>\d+)(?:/(?P<pid>\d+))?\]\s+"
    r"(?P<wait>\d+\.\d+)\s+(?P<delay>\d+\.\d+)\s+(?P<run>\d+\.\d+)"
)
_TIMEHIST_HEADER = re.compile(r"^time\s+cpu\s+task name|^Runtime summary|^comm\s+parent\s+sched-in")
_TASK = re.compile(r"^(?P<comm>.*?):(?:(?P<pid>\d+)|\((?P<merged>\d+)\))$")


@dataclass(frozen=True)
class SchedReport:
    """The tasks of one ``perf sched`` report (latency rows, timehist events or its summary), which kind it was,
    and the damaged lines read past."""

    kind: str  # "latency", "timehist", "timehist summary"
    tasks: tuple[TaskDelay, ...]
    damage: tuple[Damage, ...]


def _rows(text: str) -> list[tuple[int, str]]:
    return [(line.number, " ".join(unquoted(line.text).split())) for line in lines(text)]


def looks_like(text: str) -> bool:
    """True when *text* has ``perf sched latency`` rows, ``timehist`` events or its run-time summary."""
    rows = [row for _n, row in _rows(text)]
    latency = sum(1 for row in rows if _LATENCY_ROW.match(row))
    events = sum(1 for row in rows if _EVENT.match(row))
    summary = any(row.startswith("Runtime summary") for row in rows)
    return (latency >= 1 and any(_LATENCY_HEADER.match(row) for row in rows)) or events >= 2 or summary


def looks_like_error(text: str) -> bool:
    """perf's failure to read its data file."""
    rows = [row for _n, row in _rows(text) if row]
    return (
        bool(rows)
        and any(row.startswith(("incompatible file format", "failed to open")) for row in rows[:3])
        and (not looks_like(text))
    )


def _task(name: str) -> tuple[str, int | None]:
    found = _TASK.match(name)
    if found is None:
        return name, None
    return found["comm"], int(found["pid"]) if found["pid"] else None


def _events(rows: list[tuple[int, str]]) -> list[TaskDelay]:
    tasks: dict[tuple[str, int], list[float]] = {}  # (comm, pid): [run, switches, delay, longest]
    for _number, row in rows:
        if (event := _EVENT.match(row)) is None or event["comm"] == "<idle>":
            continue
        pid = int(event["pid"] or event["tid"])
        seen = tasks.setdefault((event["comm"], pid), [0.0, 0.0, 0.0, 0.0])
        delay = float(event["delay"]) / 1000
        seen[0] += float(event["run"]) / 1000
        seen[1] += 1
        seen[2] += delay
        seen[3] = max(seen[3], delay)
    return [
        TaskDelay(comm, pid, run, int(switches), delay / switches if switches else None, longest)
        for (comm, pid), (run, switches, delay, longest) in tasks.items()
    ]


def _summary(rows: list[tuple[int, str]]) -> list[TaskDelay]:
    tasks: dict[tuple[str, int], list[float]] = {}
    for _number, row in rows:
        if (found := _SUMMARY_ROW.match(row)) is None:
            continue
        pid = int(found["pid"] or found["tid"])
        seen = tasks.setdefault((found["comm"], pid), [0.0, 0.0])
        seen[0] += float(found["run"]) / 1000
        seen[1] += int(found["count"])
    return [TaskDelay(comm, pid, run, int(count), None, None) for (comm, pid), (run, count) in tasks.items()]


def parse(text: str) -> SchedReport:
    """The tasks in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `Task | Runtime ms | Switches |` rows, timehist events or its summary")
    rows = _rows(text)
    damage: list[Damage] = []
    if any(_LATENCY_HEADER.match(row) for _n, row in rows):
        tasks: list[TaskDelay] = []
        for number, row in rows:
            if (found := _LATENCY_ROW.match(row)) is not None:
                name, pid = _task(found["task"])
                if name.startswith("TOTAL"):
                    continue
                avg, longest = float(found["avg"]) / 1000, float(found["max"]) / 1000
                tasks.append(TaskDelay(name, pid, float(found["runtime"]) / 1000, int(found["switches"]), avg, longest))
            elif "|" in row and not _LATENCY_HEADER.match(row) and not row.startswith(("TOTAL", "-")):
                damage.append(Damage(number, f"a task's row cut short, skipped ({row[:40]!r})"))
        kind = "latency"
    elif any(_EVENT.match(row) for _n, row in rows):
        tasks, kind = _events(rows), "timehist"
    else:
        tasks, kind = _summary(rows), "timehist summary"
    tasks.sort(key=lambda task: -task.runtime_seconds)
    return SchedReport(kind, tuple(tasks), tuple(damage))


def to_facts(report: SchedReport, source: str) -> Part:
    """The node's tasks, their run time and delays, and who held the CPUs."""
    holders = tuple((task.name if task.pid is None else f"{task.name} ({task.pid})", task.runtime_seconds)
                    for task in report.tasks[:10])  # fmt: skip
    said = [
        f"{source}: perf sched {report.kind} of {len(report.tasks)} tasks: the whole machine; how long it recorded "
        "is not in it"
    ]
    if report.kind == "timehist summary":
        said.append(f"{source}: the run-time summary has no delays: `perf sched latency` or timehist without -s")
    node = NodeView(task_delays=report.tasks or None, cpu_holders=holders or None)
    return Part(FORMAT, source, node, notes=(*said, *notes(source, report.damage)))
