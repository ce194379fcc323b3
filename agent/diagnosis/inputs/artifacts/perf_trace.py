"""``perf trace -s`` summaries: per-thread system call counts and times.

Older perf (the seed's) prints no errors column, newer perf (5.x, 6.x) does; whitespace may be collapsed by a
paste, a long row may be wrapped, and perf may cut the first letter of a thread's name. Lines before
``Summary of events:`` (the trace itself with ``perf trace -S``, the traced program's output) are skipped;
``LOST N events!`` lines, wherever they are, are summed. A sample, as posted by the seed case's reporter
(GCP VM, older perf)::

    Summary of events:
    python (2847), 10240661 events, 6.0%
    syscall calls total min avg max stddev
    (msec) (msec) (msec) (msec) (%)
    --------------- -------- --------- --------- --------- --------- ------
    futex 2909 269175.495 0.001 92.532 21907.964 13.70%
    sched_yield 5119771 63387.192 0.002 0.012 98.500 0.60%
    ython (2848), 10952416 events, 6.4%
    syscall calls total min avg max stddev
    (msec) (msec) (msec) (msec) (%)
    --------------- -------- --------- --------- --------- --------- ------
    futex 2944 269333.572 0.001 91.486 21908.135 13.70%
    sched_yield 5475608 62191.735 0.002 0.011 54.373 0.56%

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> summary = parse(docstring_sample(__doc__))
>>> [(t.comm, t.tid, t.events) for t in summary.threads]
[('python', 2847, 10240661), ('ython', 2848, 10952416)]
>>> row = summary.thread(2847).syscall("sched_yield")
>>> row.calls, row.total_ms, row.min_ms, row.avg_ms, row.max_ms, row.stddev_percent, row.errors
(5119771, 63387.192, 0.002, 0.012, 98.5, 0.6, None)
>>> summary.errors_column
False

Facts (:func:`to_facts`): one thread view per thread block, the workload's totals summed over them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import table
from agent.diagnosis.inputs.artifacts.damage import Damage
from agent.diagnosis.inputs.artifacts.damage import notes as damage_notes
from agent.diagnosis.inputs.artifacts.errors import CommandFailed, Malformed, NotThisFormat
from agent.diagnosis.inputs.artifacts.known import seconds_by_call, sum_known
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.syscalls import SyscallStat
from agent.diagnosis.inputs.artifacts.text import Line, lines, meaningful, trimmed

__all__ = ["FORMAT", "PerfTraceSummary", "ThreadSyscalls", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "perf trace -s"


# --- the records: what the tool printed, nothing inferred -----------------------------------------


@dataclass(frozen=True)
class ThreadSyscalls:
    """One thread's block of a ``perf trace -s`` summary (``python (2847), 10240661 events, 6.0%``).

    *comm* is the name exactly as printed (perf may print it cut, e.g. ``ython``); None for a summary without
    per-thread blocks.
    """

    comm: str | None
    tid: int | None
    events: int | None
    events_percent: float | None
    syscalls: tuple[SyscallStat, ...]
    majfaults: int | None = None  # printed with perf trace -F
    minfaults: int | None = None
    runtime_ms: float | None = None  # printed with perf trace --sched

    def syscall(self, name: str) -> SyscallStat | None:
        """The row for system call *name*, None when this thread made none."""
        return next((stat for stat in self.syscalls if stat.name == name), None)


@dataclass(frozen=True)
class PerfTraceSummary:
    """A ``perf trace -s`` summary: one block per thread, in the order printed."""

    threads: tuple[ThreadSyscalls, ...]
    errors_column: bool  # newer perf prints an errors column; the seed's older perf does not
    lost_events: int  # sum of the "LOST N events!" lines: perf dropped that many events, its counts are low
    summaries: int = 1  # "Summary of events:" sections in the file, each read (a thread in several: added up)
    damage: tuple[Damage, ...] = ()  # rows cut, wrapped past repair or garbled: skipped, each named

    def thread(self, tid: int) -> ThreadSyscalls | None:
        """The block of thread *tid*, None if absent."""
        return next((thread for thread in self.threads if thread.tid == tid), None)


# --- recognising and parsing ----------------------------------------------------------------------

_THREAD = re.compile(
    r"(?P<comm>.*?) ?\((?P<tid>\d+)\), (?P<events>\d+) events, (?P<percent>\d+(?:[.,]\d+)?)%"
    r"(?:, (?P<majfaults>\d+) majfaults)?(?:, (?P<minfaults>\d+) minfaults)?(?:, (?P<runtime>\d+(?:[.,]\d+)?) msec)?"
)
_COLUMNS = re.compile(r"syscall +calls +(?P<errors>errors +)?total +min +avg +max +stddev")
_UNITS = re.compile(r"\(msec\)( +\(msec\))* +\(%\)")
_LOST = re.compile(r"LOST (\d+) events!")
_SUMMARY = "Summary of events:"
# What perf prints when it cannot trace: "Error:\tNo permissions to read /sys/kernel/tracing/events/raw_syscalls/...",
# "perf: 'trace' is not a perf-command", "Error: ... Permission denied".
_ERROR = re.compile(r"(Error:|perf:|[Ff]ailed to)\s*(?P<message>.+)")


def looks_like(text: str) -> bool:
    """True when *text* holds a thread header or the column header of a ``perf trace -s`` summary."""
    for line in meaningful(lines(text)):
        stripped = line.text.strip()
        if _THREAD.fullmatch(stripped) or _COLUMNS.fullmatch(stripped) or stripped == _SUMMARY:
            return True
    return False


def looks_like_error(text: str) -> bool:
    """True when *text* is perf's own error message about tracing system calls."""
    return _command_error(meaningful(lines(text))) is not None


def _command_error(rows: list[Line]) -> Line | None:
    for line in rows:
        stripped = line.text.strip()
        match = _ERROR.match(stripped)
        if match and ("trac" in stripped or "perf" in stripped or "ermission" in stripped):
            return Line(line.number, stripped)
    return None


def parse(text: str) -> PerfTraceSummary:
    """The summary in *text*; raises NotThisFormat, CommandFailed or Malformed (see .errors)."""
    if text.count(_SUMMARY) > 1:
        return _many(text)
    rows = meaningful(lines(text))
    if not rows:
        raise NotThisFormat(FORMAT, "the text is empty")
    lost = _lost(rows)
    starts = [i for i, line in enumerate(rows) if line.text.strip() == _SUMMARY]
    if not starts and not looks_like(text):
        error = _command_error(rows)
        if error is not None:
            raise CommandFailed(FORMAT, error.text, error.number)
        raise NotThisFormat(FORMAT, "no 'NAME (TID), N events, P%' block and no 'syscall calls ...' header")
    rows = rows[starts[0] + 1 :] if starts else rows  # perf trace -S prints the trace first
    return _Reader(trimmed(rows, _opens_block, _inside_summary), lost).read()


def _lost(rows: list[Line]) -> int:
    """The events perf said it lost (``LOST N events!`` lines, wherever they are)."""
    return sum(int(match.group(1)) for line in rows if (match := _LOST.fullmatch(line.text.strip())))


def _many(text: str) -> PerfTraceSummary:
    """Several summaries in one file (runs appended to one log): each read on its own lines (so that memory holds
    one summary's lines at a time), a thread of the same id and name in several added up."""
    parts = text.split(_SUMMARY)
    number = parts[0].count("\n") + 1  # the line of the first "Summary of events:"
    lost = _lost(meaningful(lines(parts[0])))
    threads: dict[tuple[int | None, str | None], ThreadSyscalls] = {}
    damage: list[Damage] = []
    errors_column = False
    for part in parts[1:]:
        found = meaningful(lines(part, first=number))
        lost += _lost(found)
        section = trimmed(found, _opens_block, _inside_summary)
        try:
            summary = _Reader(section, 0).read()
        except Malformed as error:
            damage.append(Damage(number, f"a summary without thread blocks, skipped ({error.reason})"))
        else:
            errors_column = summary.errors_column
            damage.extend(summary.damage)
            for thread in summary.threads:
                key = (thread.tid, thread.comm)
                threads[key] = _added(threads[key], thread) if key in threads else thread
        number += part.count("\n")
    if not threads:
        raise Malformed(FORMAT, number, "no summary has thread blocks (the output was cut short?)")
    return PerfTraceSummary(
        tuple(threads.values()), errors_column, lost, summaries=len(parts) - 1, damage=tuple(damage)
    )


def _added(one: ThreadSyscalls, other: ThreadSyscalls) -> ThreadSyscalls:
    """One thread's blocks of two summaries as one: counts and times added, the extremes kept (stddev, a share of
    one run's mean, and the events' share of one run, are not kept)."""
    rows = {stat.name: stat for stat in one.syscalls}
    for stat in other.syscalls:
        was = rows.get(stat.name)
        if was is None:
            rows[stat.name] = stat
            continue
        calls, total = was.calls + stat.calls, was.total_ms + stat.total_ms
        rows[stat.name] = SyscallStat(
            name=stat.name,
            calls=calls,
            total_ms=total,
            avg_ms=total / calls if calls else None,
            errors=None if was.errors is None or stat.errors is None else was.errors + stat.errors,
            min_ms=None if was.min_ms is None or stat.min_ms is None else min(was.min_ms, stat.min_ms),
            max_ms=None if was.max_ms is None or stat.max_ms is None else max(was.max_ms, stat.max_ms),
        )
    events = None if one.events is None or other.events is None else one.events + other.events
    return ThreadSyscalls(one.comm, one.tid, events, None, tuple(rows.values()))


def _opens_block(line: Line) -> bool:
    stripped = line.text.strip()
    return _THREAD.fullmatch(stripped) is not None or _COLUMNS.fullmatch(stripped) is not None


def _inside_summary(line: Line) -> bool:
    """Any line a summary ends with: a thread line, a header, or something shaped like a row (even a cut one)."""
    fields = line.fields
    return _opens_block(line) or (len(fields) >= 2 and fields[1][:1].isdigit()) or table.is_rule(line)


class _Reader:
    """Walks the summary's lines once, collecting one block per thread."""

    def __init__(self, rows: list[Line], lost: int) -> None:
        self.rows = rows
        self.threads: list[ThreadSyscalls] = []
        self.header: re.Match[str] | None = None
        self.syscalls: list[SyscallStat] = []
        self.in_table = False
        self.errors_column: bool | None = None
        self.lost = lost  # counted over the whole text: perf prints them while tracing, before the summary
        self.damage: list[Damage] = []

    def read(self) -> PerfTraceSummary:
        index = 0
        while index < len(self.rows):
            index += self.step(index)
        self.close()
        if not self.threads:
            line = self.rows[-1].number if self.rows else 1
            raise Malformed(FORMAT, line, "a summary with no thread blocks (the output was cut short?)")
        return PerfTraceSummary(tuple(self.threads), bool(self.errors_column), self.lost, damage=tuple(self.damage))

    def step(self, index: int) -> int:
        """Consumes the line at *index* (and the lines a wrapped row spilled onto); returns how many."""
        line = self.rows[index]
        if self._row_shaped(line):  # the commonest line, read without trying every pattern first
            found = self.row(line, last=index + 1 >= len(self.rows))
            if found is not None:
                self.syscalls.append(found)
            return 1
        stripped = line.text.strip()
        if _LOST.fullmatch(stripped):
            return 1
        if (whole := self._whole_line(line, stripped)) is not None:
            return whole
        joined, used = table.unwrap(self.rows, index, self.recognised)
        stripped = joined.text.strip()
        if thread := _THREAD.fullmatch(stripped):
            self.close()
            self.header = thread
            return used
        if columns := _COLUMNS.fullmatch(stripped):
            if self.in_table or self.syscalls:  # a table without a thread line: perf's "total" summary mode
                self.close()
            self.errors_column = columns.group("errors") is not None
            self.in_table = True
            return used
        if _UNITS.fullmatch(stripped) or table.is_rule(joined):
            return used
        if not self.in_table:
            self.damage.append(
                Damage(line.number, f"not a thread line or a column header, skipped ({stripped[:40]!r})")
            )
            return used
        found = self.row(joined, last=index + used >= len(self.rows))
        if found is not None:
            self.syscalls.append(found)
        return used

    def _whole_line(self, line: Line, stripped: str) -> int | None:
        """The header lines every block repeats, read at once (their first characters say which), else None."""
        if (stripped.startswith("---") and table.is_rule(line)) or (
            stripped.startswith("(msec)") and _UNITS.fullmatch(stripped)
        ):
            return 1
        if stripped.startswith("syscall ") and (columns := _COLUMNS.fullmatch(stripped)):
            if self.in_table or self.syscalls:
                self.close()
            self.errors_column = columns.group("errors") is not None
            self.in_table = True
            return 1
        if " events, " in stripped and (thread := _THREAD.fullmatch(stripped)):
            self.close()
            self.header = thread
            return 1
        return None

    def _row_shaped(self, line: Line) -> bool:
        """A whole system-call row of the table being read: its fields, the last a percentage, the second a count."""
        if not self.in_table:
            return False
        fields = line.fields
        return len(fields) == self.row_width() and fields[-1].endswith("%") and fields[1].isdigit()

    def recognised(self, line: Line) -> bool:
        if self._row_shaped(line):
            return True
        stripped = line.text.strip()
        if any(pattern.fullmatch(stripped) for pattern in (_THREAD, _COLUMNS, _UNITS, _LOST)) or table.is_rule(line):
            return True
        return self.in_table and len(line.fields) >= self.row_width() and line.fields[-1].endswith("%")

    def row_width(self) -> int:
        return 8 if self.errors_column else 7

    def row(self, line: Line, last: bool) -> SyscallStat | None:
        """The system call of *line*; None (and the damage named) for a row cut short or garbled."""
        fields = line.fields
        if len(fields) != self.row_width():
            kept = "the rows above it read" if last else "skipped"
            what = "the last row cut short" if last and len(fields) < self.row_width() else "a row garbled"
            self.damage.append(Damage(line.number, f"{what} ({len(fields)} of {self.row_width()} fields): {kept}"))
            return None
        name, calls, *rest = fields
        try:
            errors = table.whole(FORMAT, line, "errors", rest.pop(0)) if self.errors_column else None
            total, low, avg, high, stddev = (
                table.number(FORMAT, line, what, token)
                for what, token in zip(("total", "min", "avg", "max", "stddev"), rest, strict=True)
            )
            counted = table.whole(FORMAT, line, "calls", calls)
        except Malformed as error:
            self.damage.append(Damage(line.number, f"{name}: {error.reason}, row skipped"))
            return None
        return SyscallStat(
            name=name,
            calls=counted,
            total_ms=total,
            avg_ms=avg,
            errors=errors,
            min_ms=low,
            max_ms=high,
            stddev_percent=stddev,
        )

    def close(self) -> None:
        """Ends the current thread's block (if any) and keeps it."""
        if self.header is None and not self.syscalls:
            self.in_table = False
            return
        header = self.header
        self.threads.append(
            ThreadSyscalls(
                comm=header.group("comm") if header else None,
                tid=int(header.group("tid")) if header else None,
                events=int(header.group("events")) if header else None,
                events_percent=float(header.group("percent").replace(",", ".")) if header else None,
                syscalls=tuple(self.syscalls),
                majfaults=_optional_int(header, "majfaults"),
                minfaults=_optional_int(header, "minfaults"),
                runtime_ms=float(header["runtime"].replace(",", ".")) if header and header["runtime"] else None,
            )
        )
        self.header = None
        self.syscalls = []
        self.in_table = False


def _optional_int(header: re.Match[str] | None, group: str) -> int | None:
    value = header[group] if header else None
    return int(value) if value else None


# --- facts: what the records tell the rules -------------------------------------------------------

NO_CLOCK = "perf trace -s does not say how long it ran: rates (calls per second) are unknown, only counts and times"
SLOWED = (
    "perf trace slows the loops it traces: a sched_yield storm shows 10-30x fewer calls than it makes untraced, "
    "so its counts are a floor"
)
NO_OPS = (
    "perf trace -s does not split futex calls by operation (wait, wake); their time is mostly time waiting, "
    "and it names threads, not the processes they belong to"
)


def _seconds(milliseconds: float) -> float:
    return milliseconds / 1000.0


def thread_view(block: ThreadSyscalls) -> ThreadView:
    """One thread's block: a thread that made no such call made 0 (perf trace sees every system call of a thread);
    a block whose table is empty (perf 6.1 with ``-F``) tells no counts at all."""
    if not block.syscalls:
        return ThreadView(tid=block.tid, comm=block.comm)
    yields = block.syscall("sched_yield")
    futex = block.syscall("futex")
    return ThreadView(
        tid=block.tid,
        comm=block.comm,
        sched_yield_calls=yields.calls if yields else 0,
        sched_yield_seconds=_seconds(yields.total_ms) if yields else 0.0,
        futex_calls=futex.calls if futex else 0,
        futex_seconds=_seconds(futex.total_ms) if futex else 0.0,
        futex_max_seconds=None if futex is None or futex.max_ms is None else _seconds(futex.max_ms),
        syscall_seconds=_seconds(sum(stat.total_ms for stat in block.syscalls)),
    )


def to_facts(summary: PerfTraceSummary, source: str) -> Part:
    """The workload that perf traced: its threads and their sums."""
    threads = tuple(thread_view(block) for block in summary.threads)
    yields = sum_known(thread.sched_yield_calls for thread in threads)
    workload = WorkloadView(
        ref=Workload(),
        threads=len(threads),
        sched_yield_calls=yields,
        futex_wait_seconds=sum_known(thread.futex_seconds for thread in threads),
        syscall_seconds=seconds_by_call(
            (stat.name, _seconds(stat.total_ms)) for block in summary.threads for stat in block.syscalls
        ),
        thread_views=threads,
    )
    notes = [NO_CLOCK, NO_OPS]
    if yields:
        notes.append(SLOWED)
    if summary.lost_events:
        notes.append(
            f"perf trace lost {summary.lost_events:,} events (its buffer was full): its counts are lower still; "
            "`perf trace -m 64M` gives it a larger buffer"
        )
    if any(thread.sched_yield_calls is None for thread in threads):
        notes.append("some perf trace blocks have an empty table (perf with -F): their calls are unknown")
    if summary.summaries > 1:
        notes.append(
            f"{source}: {summary.summaries} summaries in one file, each read and merged: a thread of the same id and "
            "name in several is one thread, its counts added (runs traced one after the other)"
        )
    return Part(FORMAT, source, NodeView(), workload, (*notes, *damage_notes(source, summary.damage)),
                untimed_counts=True)  # fmt: skip
