"""``strace -c`` summaries (also ``-f -c``, ``-c -w``, ``-c -p PID``): one row per system call.

strace 4.x and newer print the same columns; the total line of older versions has no ``usecs/call``. Locales
with decimal commas print ``52,28``. Lines strace prints around the table (``strace: Process 5748 attached
with 10 threads``, ``[ Process PID=6089 runs in x32 mode. ]``) and the traced program's own output are
skipped. A sample, posted in a public issue (strace/strace#95, ``strace -f -c sleep 1``)::

    % time     seconds  usecs/call     calls    errors syscall
    ------ ----------- ----------- --------- --------- ----------------
     21.85    0.000104          17         6           mmap
     17.86    0.000085          21         4           mprotect
     12.39    0.000059          20         3           openat
     11.34    0.000054          11         5           close
     11.13    0.000053          53         1           munmap
      6.93    0.000033          33         1           nanosleep
      6.51    0.000031          10         3           fstat
      4.62    0.000022           7         3           brk
      2.73    0.000013          13         1           read
      2.52    0.000012           4         3         3 access
      2.10    0.000010          10         1           arch_prctl
      0.00    0.000000           0         1           execve
    ------ ----------- ----------- --------- --------- ----------------
    100.00    0.000476                    32         3 total

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> table = parse(docstring_sample(__doc__)).main
>>> row = table.syscall("access")
>>> row.calls, row.errors, row.total_ms, row.avg_ms, row.time_percent
(3, 3, 0.012, 0.004, 2.52)
>>> (table.total.calls, table.total.errors, table.total.total_ms)
(32, 3, 0.476)

Facts (:func:`to_facts`): the workload's totals (strace sums every traced thread into one table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import table as columns
from agent.diagnosis.inputs.artifacts.damage import Damage
from agent.diagnosis.inputs.artifacts.damage import notes as damage_notes
from agent.diagnosis.inputs.artifacts.errors import CommandFailed, Malformed, NotThisFormat
from agent.diagnosis.inputs.artifacts.known import seconds_by_call
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.syscalls import SyscallStat
from agent.diagnosis.inputs.artifacts.text import Line, lines, meaningful

__all__ = ["FORMAT", "StraceSummary", "StraceTable", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "strace -c"


# --- the records: what the tool printed, nothing inferred -----------------------------------------


@dataclass(frozen=True)
class StraceTable:
    """One ``strace -c`` table; strace prints one per personality (``System call usage summary for 32 bit mode``).

    ``strace -c -w`` prints the same table with wall-clock instead of system CPU time; the table does not say
    which, so :attr:`total` and the rows cannot tell either.
    """

    personality: str | None
    syscalls: tuple[SyscallStat, ...]
    total: SyscallStat | None

    def syscall(self, name: str) -> SyscallStat | None:
        """The row for system call *name*, None when it was not called."""
        return next((stat for stat in self.syscalls if stat.name == name), None)


@dataclass(frozen=True)
class StraceSummary:
    """A ``strace -c`` report (``-f`` sums every traced thread and process into one table)."""

    tables: tuple[StraceTable, ...]
    attached: tuple[int, ...]  # pids named in "strace: Process N attached" lines (strace -p)
    damage: tuple[Damage, ...] = ()  # rows cut or garbled, a total line cut off: skipped, each named

    @property
    def main(self) -> StraceTable:
        """The first (for most programs the only) table."""
        return self.tables[0]


# --- recognising and parsing ----------------------------------------------------------------------

_HEADER = re.compile(r"% ?time +seconds +usecs/call +calls +errors +syscall")
_PERSONALITY = re.compile(r"System call usage summary for (?P<name>.+?) mode:")
_ATTACHED = re.compile(r"strace: Process (?P<pid>\d+) attached")
# What strace says around the table that is no error: "strace: Process 5748 attached with 10 threads",
# "strace: [ Process PID=6089 runs in x32 mode. ]".
_CHATTER = re.compile(r"(strace: )?(Process \d+ (attached|detached|resumed|suspended)|\[ Process PID=)")


def looks_like(text: str) -> bool:
    """True when *text* holds the column header of a ``strace -c`` table."""
    return any(_HEADER.fullmatch(line.text.strip()) for line in lines(text))


def looks_like_error(text: str) -> bool:
    """True when *text* is strace's own error message (``strace: ...``) and holds no table."""
    return not looks_like(text) and _command_error(meaningful(lines(text))) is not None


def _command_error(rows: list[Line]) -> Line | None:
    for line in rows:
        stripped = line.text.strip()
        if stripped.startswith("strace: ") and not _CHATTER.match(stripped):
            return Line(line.number, stripped)
    return None


def parse(text: str) -> StraceSummary:
    """The summary in *text*; raises NotThisFormat, CommandFailed or Malformed (see .errors)."""
    rows = meaningful(lines(text))
    if not rows:
        raise NotThisFormat(FORMAT, "the text is empty")
    headers = [i for i, line in enumerate(rows) if _HEADER.fullmatch(line.text.strip())]
    if not headers:
        error = _command_error(rows)
        if error is not None:
            raise CommandFailed(FORMAT, error.text, error.number)
        raise NotThisFormat(FORMAT, "no '% time  seconds  usecs/call  calls  errors syscall' header")
    attached = tuple(int(m.group("pid")) for line in rows if (m := _ATTACHED.match(line.text.strip())))
    tables = []
    damage: list[Damage] = []
    for position, start in enumerate(headers):
        end = headers[position + 1] if position + 1 < len(headers) else len(rows)
        named = _PERSONALITY.fullmatch(rows[start - 1].text.strip()) if start > 0 else None
        personality = named.group("name") if named else None
        tables.append(_table(rows[start + 1 : end], personality, rows[start], damage))
    return StraceSummary(tuple(tables), attached, tuple(damage))


def _table(rows: list[Line], personality: str | None, header: Line, damage: list[Damage]) -> StraceTable:
    """One table; a row cut or garbled is skipped and a cut total line said (in *damage*), the rest read."""
    if not rows or not columns.is_rule(rows[0]):
        raise Malformed(FORMAT, header.number + 1, "expected the dashed line under the column header")
    syscalls: list[SyscallStat] = []
    index = 1
    while index < len(rows):
        line = rows[index]
        if columns.is_rule(line):
            if index + 1 >= len(rows):
                damage.append(Damage(line.number, "the total line is cut off: the rows above it read"))
                return StraceTable(personality, tuple(syscalls), None)
            try:
                total = _total(rows[index + 1], syscalls)
            except Malformed as error:
                damage.append(Damage(error.line, f"the total line: {error.reason}; the rows above it read"))
                total = None
            return StraceTable(personality, tuple(syscalls), total)
        if _PERSONALITY.fullmatch(line.text.strip()):
            break
        row, used = columns.unwrap(rows, index, _complete_row)
        try:
            syscalls.append(_row(row))
        except Malformed as error:
            damage.append(Damage(error.line, f"{error.reason}, skipped"))
        index += used
    if not syscalls:
        raise Malformed(FORMAT, header.number, "a table with no rows")
    return StraceTable(personality, tuple(syscalls), None)  # a paste that stops before the total line


def _complete_row(line: Line) -> bool:
    fields = line.fields
    return columns.is_rule(line) or (len(fields) in (5, 6) and not fields[-1][0].isdigit())


def _row(line: Line) -> SyscallStat:
    fields = line.fields
    if len(fields) not in (5, 6):
        raise Malformed(
            FORMAT, line.number, f"a row cut or garbled ({len(fields)} of 5 or 6 fields: {line.text[:40]!r})"
        )
    percent, seconds, usecs, calls = fields[:4]
    errors = columns.whole(FORMAT, line, "errors", fields[4]) if len(fields) == 6 else None
    return SyscallStat(
        name=fields[-1],
        calls=columns.whole(FORMAT, line, "calls", calls),
        total_ms=_ms(columns.number(FORMAT, line, "seconds", seconds)),
        avg_ms=columns.number(FORMAT, line, "usecs/call", usecs) / 1000,
        errors=errors,
        time_percent=columns.number(FORMAT, line, "% time", percent),
    )


def _total(line: Line, syscalls: list[SyscallStat]) -> SyscallStat:
    """The ``total`` line; older strace leaves ``usecs/call`` out, and errors are blank when there were none."""
    fields = line.fields
    if not fields or fields[-1] != "total" or not 4 <= len(fields) <= 6:
        raise Malformed(FORMAT, line.number, f"expected the total line, found {line.text!r}")
    values = [columns.number(FORMAT, line, "a total", field) for field in fields[:-1]]
    calls = sum(stat.calls for stat in syscalls)
    if len(values) == 6 - 1:
        percent, seconds, usecs, total_calls, errors = values
    elif len(values) == 3:
        (percent, seconds, total_calls), usecs, errors = values, None, None
    elif values[2] == calls:  # percent, seconds, calls, errors: the older layout without usecs/call
        (percent, seconds, total_calls, errors), usecs = values, None
    elif values[3] == calls:
        (percent, seconds, usecs, total_calls), errors = values, None
    else:
        raise Malformed(FORMAT, line.number, f"the total line matches no layout (rows sum to {calls} calls)")
    return SyscallStat(
        name="total",
        calls=int(total_calls),
        total_ms=_ms(seconds),
        avg_ms=usecs / 1000 if usecs is not None else None,
        errors=int(errors) if errors is not None else None,
        time_percent=percent,
    )


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 6)  # strace prints microsecond resolution


# --- facts: what the records tell the rules -------------------------------------------------------

NO_THREADS = (
    "strace -c sums every traced thread into one table: it cannot say which threads yielded or waited, and "
    "without -f it follows only the first thread"
)
NO_CLOCK = "strace -c does not say how long it ran: rates are unknown, only counts"
CPU_OR_WALL = (
    "strace -c prints system CPU time, or wall-clock time with -w, and the table does not say which: "
    "its times are not read as futex wait time"
)
SLOWED = (
    "strace slows the loops it traces: a sched_yield storm shows about 10x fewer calls than it makes untraced "
    "(more on a quiet machine), so its counts are a floor"
)


def to_facts(summary: StraceSummary, source: str) -> Part:
    """The traced workload's sched_yield count (0 when no table lists it: strace -c lists every call it saw)."""
    yields = sum(row.calls for table in summary.tables for row in table.syscalls if row.name == "sched_yield")
    per_call = seconds_by_call((row.name, row.total_ms / 1000.0) for table in summary.tables for row in table.syscalls)
    workload = WorkloadView(ref=Workload(), sched_yield_calls=float(yields), syscall_seconds=per_call)
    notes = [NO_CLOCK, NO_THREADS, CPU_OR_WALL]
    if yields:
        notes.append(SLOWED)
    unnamed = [table for table in summary.tables if table.personality is None]
    if len(unnamed) > 1:
        notes.append(f"{source}: {len(unnamed)} strace -c tables in one file (runs appended), each read and added up")
    return Part(FORMAT, source, NodeView(), workload, (*notes, *damage_notes(source, summary.damage)),
                untimed_counts=True)  # fmt: skip
