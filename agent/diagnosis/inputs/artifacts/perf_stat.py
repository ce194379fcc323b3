"""``perf stat`` reports (``perf stat -p PID``, ``-t TID``, ``-a``, ``--repeat N``; old ``task-clock (msec)`` and new
``msec task-clock`` layouts), in any locale: the decimal mark is the one of the ``seconds time elapsed`` line, the
other mark, spaces and apostrophes group thousands (``1.190.884``, ``1 190 884``, ``1'190'884``). Multiplexing
percentages (``(79,30%)``) and ``<not supported>`` / ``<not counted>`` rows are read. A German-locale report from a
public thread (vim/vim#1089, rows cut here)::

     Performance counter stats for '/bin/dash -c echo foo' (100 runs):

              0,551163      task-clock (msec)         #    0,501 CPUs utilized
                     2      context-switches          #    0,003 M/sec
                    50      page-faults               #    0,076 M/sec
             1.190.884      cycles                    #    1,808 GHz                      (79,30%)

           0,001101122 seconds time elapsed                                          ( +-  2,70% )

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.target, report.runs, report.elapsed, report.counter("cycles").value, report.counter("cycles").running)
("'/bin/dash -c echo foo'", 100, 0.001101122, 1190884.0, 79.3)

Facts (:func:`to_facts`): for a command, ``-p`` or ``-t``: the workload's CPU seconds (task-clock), window, CPUs
used, context switches, page faults, and user/system seconds where perf prints them; for ``-a``: the node's context
switches per second. perf stat cannot tell voluntary from involuntary switches, nor which code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.errors import Malformed, NotThisFormat, prints_no_error
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import Line, lines, meaningful

__all__ = ["FORMAT", "PerfStatCounter", "PerfStatReport", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "perf stat"


@dataclass(frozen=True)
class PerfStatCounter:
    """One counter row: its value (None: not supported or not counted), unit, and the share of time it ran."""

    event: str  # as printed, without a ":u"/":k" modifier: "task-clock", "context-switches", "cycles"
    value: float | None
    unit: str | None  # "msec" for the clocks
    running: float | None  # multiplexing: % of the time the counter was on the PMU


@dataclass(frozen=True)
class PerfStatReport:
    """A ``perf stat`` report: what it counted (*target*: the quoted command, ``process id 'N'``, ``system wide``)."""

    target: str
    runs: int | None  # --repeat N
    counters: tuple[PerfStatCounter, ...]
    elapsed: float | None
    user: float | None  # "seconds user" (perf 5.x and newer, commands only)
    system: float | None

    def counter(self, event: str) -> PerfStatCounter | None:
        """The row of *event*, or None when perf did not print it."""
        return next((row for row in self.counters if row.event == event), None)


_HEADER = re.compile(r"Performance counter stats for (?P<target>.+?)(?: \((?P<runs>\d+) runs\))?:$")
_SECONDS = re.compile(r"(?P<value>[\d.,]+) seconds (?P<what>time elapsed|user|sys)\b")
_RUNNING = re.compile(r"\((?P<share>[\d.,]+)%\)$")


def _texts(text: str) -> list[Line]:
    # `> ` quotes, and a Markdown fence the paste left on the header's line (```` ``` Performance counter ... ````)
    return [
        Line(line.number, line.text.strip().removeprefix("> ").strip().removeprefix("```").strip())
        for line in meaningful(lines(text))
    ]


def looks_like(text: str) -> bool:
    """True when *text* holds perf stat's ``Performance counter stats for ...`` line."""
    return any(_HEADER.match(line.text) for line in _texts(text))


# perf's own errors (permissions, a missing event) are the same for every perf command; the `perf trace -s`
# row claims them, so one text is one row's
looks_like_error = prints_no_error


def _number(token: str, mark: str) -> float:
    grouping = "." if mark == "," else ","
    cleaned = token.replace(grouping, "").replace("'", "").replace(" ", "").replace(mark, ".")
    return float(cleaned)


def _decimal_mark(rows: list[Line]) -> str:
    for line in rows:
        match = _SECONDS.search(line.text)
        if match:
            return "," if "," in match["value"] and "." not in match["value"] else "."
    return "."


def _counter(line: Line, mark: str) -> PerfStatCounter | None:
    left = line.text.split("#", 1)[0].strip()
    running = None
    if match := _RUNNING.search(left):
        running = _number(match["share"], mark)
        left = left[: match.start()].strip()
    elif match := _RUNNING.search(line.text):
        running = _number(match["share"], mark)
    for missing in ("<not supported>", "<not counted>"):
        if left.startswith(missing):
            return PerfStatCounter(left.removeprefix(missing).split()[0], None, None, running)
    tokens = left.split()
    if len(tokens) < 2:
        return None
    unit = None
    if tokens[-1] == "(msec)":
        unit, tokens = "msec", tokens[:-1]
    event = tokens[-1].split(":")[0]
    tokens = tokens[:-1]
    if tokens and tokens[-1] == "msec":
        unit, tokens = "msec", tokens[:-1]
    value_text = "".join(tokens)
    if not value_text or not re.fullmatch(r"[\d.,']+", value_text):
        return None
    try:
        return PerfStatCounter(event, _number(value_text, mark), unit, running)
    except ValueError:
        raise Malformed(FORMAT, line.number, f"not a count: {value_text!r}") from None


def parse(text: str) -> PerfStatReport:
    """The counters of the (first) report in *text*; raises NotThisFormat or Malformed (see .errors)."""
    rows = _texts(text)
    start = next((i for i, line in enumerate(rows) if _HEADER.match(line.text)), None)
    if start is None:
        raise NotThisFormat(FORMAT, "no 'Performance counter stats for ...' line")
    header = _HEADER.match(rows[start].text)
    assert header is not None
    mark = _decimal_mark(rows[start:])
    counters: list[PerfStatCounter] = []
    seconds: dict[str, float] = {}
    for line in rows[start + 1 :]:
        if _HEADER.match(line.text):
            break  # a second report (perf stat run again in the same paste): the first is read
        if match := _SECONDS.search(line.text):
            seconds[match["what"]] = _number(match["value"], mark)
            continue
        if (row := _counter(line, mark)) is not None:
            counters.append(row)
    if not counters:
        raise Malformed(FORMAT, rows[-1].number, "no counter rows under 'Performance counter stats' (cut short?)")
    return PerfStatReport(
        target=header["target"],
        runs=int(header["runs"]) if header["runs"] else None,
        counters=tuple(counters),
        elapsed=seconds.get("time elapsed"),
        user=seconds.get("user"),
        system=seconds.get("sys"),
    )


def _value(report: PerfStatReport, *events: str) -> float | None:
    for event in events:
        row = report.counter(event)
        if row is not None and row.value is not None:
            return row.value
    return None


def to_facts(report: PerfStatReport, source: str) -> Part:
    """A command's (or -p/-t target's) CPU seconds, window, CPUs used, switches and faults; -a: the node's rate."""
    clock_ms = _value(report, "task-clock", "cpu-clock")
    switches = _value(report, "context-switches", "cs")
    faults = _value(report, "page-faults", "faults")
    elapsed = report.elapsed
    notes = ["perf stat counts context switches without telling voluntary from involuntary, and no code"]
    if report.target.strip("'") == "system wide":
        rate = switches / elapsed if switches is not None and elapsed else None
        notes.append("perf stat -a is machine-wide: every process on the host is in it")
        return Part(FORMAT, source, NodeView(context_switches_per_second=rate), notes=tuple(notes))
    cpu = None if clock_ms is None else clock_ms / 1000
    if report.runs:
        notes.append(f"perf stat --repeat {report.runs}: every count is the mean of one run")
    cpu_split = report.user is not None and report.system is not None
    total = (report.user or 0) + (report.system or 0)
    workload = WorkloadView(
        ref=Workload(),
        seconds=elapsed,
        cpu_used_cores=cpu / elapsed if cpu is not None and elapsed else None,
        user_seconds=report.user,
        system_seconds=report.system,
        system_share=(report.system or 0) / total if cpu_split and total > 0 else None,
        page_faults=faults,
    )
    if switches is not None:
        notes.append(f"perf stat counted {switches:g} context switches (voluntary and involuntary together)")
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
