"""``pidstat`` reports: ``pidstat -t 1 3`` (a row per process and per thread), ``-u`` (CPU), ``-w`` (context
switches per second), in one table or one table each (``-wut``) or on one line (``-h``), with or without
``Average:`` rows.

Columns are found by their names in each table's header, so older sysstat (no ``%wait``) and other column sets
read the same way. 12-hour times (``01:15:03 AM``) become 24-hour. A thread row's ``|__`` is removed from the
command and marks it a thread. A sample recorded on this project's sick workload (numpy 1.26, BLAS threads
unset; sysstat 12.6, rows cut here)::

    Linux 6.18.44-fc-v669 (vm) 	12/01/26 	_x86_64_	(2 CPU)

    01:15:00      UID      TGID       TID    %usr %system  %guest   %wait    %CPU   CPU  Command
    01:15:01        0     27751         -    7.00    2.00    0.00   83.00    9.00     0  python
    01:15:01        0         -     27751    5.00    1.00    0.00   83.00    6.00     0  |__python
    01:15:01        0         -     27758    1.00    1.00    0.00   98.00    2.00     1  |__python

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> report.system.cpus, [(row.tgid, row.tid, row.wait, row.is_thread) for row in report.rows]
(2, [(27751, None, 83.0, False), (None, 27751, 83.0, True), (None, 27758, 98.0, True)])

Facts (:func:`to_facts`): CPU of each process and thread, the workload's CPU and system share, and the time
threads waited for a CPU (``%wait``), over the window the report's times span.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, ProcessView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import table
from agent.diagnosis.inputs.artifacts.damage import notes as damage_notes
from agent.diagnosis.inputs.artifacts.known import mean_known
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.sysstat import Report, Tool, named_fields, stamp, stamped
from agent.diagnosis.inputs.artifacts.text import Line

__all__ = ["FORMAT", "PidstatReport", "PidstatRow", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "pidstat"


# --- the records: what the tool printed, nothing inferred -----------------------------------------


@dataclass(frozen=True)
class PidstatRow:
    """One row of ``pidstat`` (``-t`` adds threads: a row for each process and one per thread, ``|__name``).

    *time* is 24-hour ``HH:MM:SS`` (AM/PM converted); None on the ``Average:`` rows. With ``-t``, a process row
    has *tgid* and no *tid*, a thread row has *tid* and no *tgid*; without ``-t`` only *pid* is set. Columns
    absent from the table that held the row (``pidstat -w`` prints switches in a table of their own) are None.
    """

    time: str | None
    average: bool
    uid: int | None
    user: str | None
    pid: int | None
    tgid: int | None
    tid: int | None
    usr: float | None
    system: float | None
    guest: float | None
    wait: float | None
    cpu_percent: float | None
    cpu: int | None
    cswch_per_s: float | None
    nvcswch_per_s: float | None
    command: str

    @property
    def is_thread(self) -> bool:
        """True for a thread row of ``pidstat -t`` (printed ``|__name``)."""
        return self.tid is not None and self.tgid is None


class PidstatReport(Report[PidstatRow]):
    """A ``pidstat`` report: every row of every table, in the order printed."""


# --- recognising and parsing ----------------------------------------------------------------------

_IDS = ("UID", "USER", "PID", "TGID", "TID")
_THREAD_MARK = "|__"


def _header_columns(line: Line) -> list[str] | None:
    """The column names of a pidstat header line (time prefix removed); None for any other line."""
    fields = line.fields
    if fields[:2] == ["#", "Time"]:  # pidstat -h: every report on one line, the header commented
        names = fields[2:]
    elif (prefix := stamp(fields)) is not None:
        names = fields[prefix.width :]
    else:
        return None
    return names if len(names) > 1 and names[0] in _IDS and names[-1] == "Command" else None


PIDSTAT = Tool(FORMAT, _header_columns, "no column header ending in 'Command'")

looks_like = PIDSTAT.looks_like  # the text holds a pidstat column header (``... UID ... PID ... Command``)
looks_like_error = PIDSTAT.looks_like_error  # the text is pidstat's own error or usage message, and no table


def parse(text: str) -> PidstatReport:
    """Every row in *text*; raises NotThisFormat, CommandFailed or Malformed (see .errors).

    A report whose tables are all empty (pidstat found no such process) is returned with no rows.
    """
    tables = PIDSTAT.tables(text, _row)
    return PidstatReport(tables.system, tuple(tables.rows), tuple(tables.damage))


def _row(line: Line, columns: list[str]) -> PidstatRow:
    prefix = stamped(FORMAT, line)
    rest = Line(line.number, " ".join(line.fields[prefix.width :]))
    values = named_fields(FORMAT, line, columns, table.split_row(rest, len(columns)))

    def num(name: str) -> float | None:
        return table.optional_number(FORMAT, line, name, values.get(name))

    def whole(name: str) -> int | None:
        return table.optional_whole(FORMAT, line, name, values.get(name))

    command = values["Command"]
    thread = command.startswith(_THREAD_MARK)
    return PidstatRow(
        time=prefix.time,
        average=prefix.average,
        uid=whole("UID"),
        user=values.get("USER"),
        pid=whole("PID"),
        tgid=whole("TGID"),
        tid=whole("TID"),
        usr=num("%usr"),
        system=num("%system"),
        guest=num("%guest"),
        wait=num("%wait"),
        cpu_percent=num("%CPU"),
        cpu=whole("CPU"),
        cswch_per_s=num("cswch/s"),
        nvcswch_per_s=num("nvcswch/s"),
        command=command.removeprefix(_THREAD_MARK) if thread else command,
    )


# --- facts: what the records tell the rules -------------------------------------------------------

NO_WAIT = "this pidstat prints no %wait (older sysstat): the time threads waited for a CPU is unknown"


def _clock(time: str) -> int:
    hours, minutes, seconds = (int(part) for part in time.split(":"))
    return hours * 3600 + minutes * 60 + seconds


def window_seconds(rows: Iterable[PidstatRow]) -> float | None:
    """Seconds the intervals cover: their count times their length; None with fewer than two times printed."""
    times = sorted({_clock(row.time) for row in rows if row.time is not None and not row.average})
    if len(times) < 2:
        return None
    steps = [(later - earlier) % 86400 for earlier, later in itertools.pairwise(times)]
    step = statistics.median(steps)
    return float(step * len(times)) if step > 0 else None


class _Entity:
    """The rows of one process or thread, with the process it belongs to."""

    def __init__(self, command: str, pid: int | None) -> None:
        self.command = command
        self.pid = pid
        self.rows: list[PidstatRow] = []

    def mean(self, name: str) -> float | None:
        return mean_known(getattr(row, name) for row in self.rows)


def _entities(rows: tuple[PidstatRow, ...]) -> tuple[dict[int, _Entity], dict[int, _Entity]]:
    """Processes and threads by id; the Average rows when printed (they cover every interval), else every row."""
    chosen = [row for row in rows if row.average] or list(rows)
    processes: dict[int, _Entity] = {}
    threads: dict[int, _Entity] = {}
    owner: int | None = None
    for row in chosen:
        if row.is_thread and row.tid is not None:
            threads.setdefault(row.tid, _Entity(row.command, owner)).rows.append(row)
            continue
        pid = row.tgid if row.tgid is not None else row.pid
        if pid is None:
            continue
        owner = pid
        processes.setdefault(pid, _Entity(row.command, pid)).rows.append(row)
    return processes, threads


def to_facts(report: PidstatReport, source: str) -> Part:
    """Processes and threads with their CPU; the workload's CPU in cores and its system share."""
    processes, threads = _entities(report.rows)
    per_process: dict[int | None, int] = defaultdict(int)
    for thread in threads.values():
        per_process[thread.pid] += 1
    process_views = tuple(
        ProcessView(
            pid=pid,
            comm=entity.command,
            command=entity.command,
            threads=per_process.get(pid) or None,
            cpu_percent=entity.mean("cpu_percent"),
            system_percent=entity.mean("system"),
        )
        for pid, entity in processes.items()
    )
    thread_views = tuple(
        ThreadView(
            tid=tid,
            comm=entity.command,
            pid=entity.pid,
            cpu_percent=entity.mean("cpu_percent"),
            system_percent=entity.mean("system"),
        )
        for tid, entity in threads.items()
    )
    notes: list[str] = []
    measured = list(processes.values()) or list(threads.values())
    cpu = [entity.mean("cpu_percent") for entity in measured]
    user = [entity.mean("usr") for entity in measured]
    system = [entity.mean("system") for entity in measured]
    waits = [entity.mean("wait") for entity in measured]
    cores = None if not cpu or None in cpu else sum(value or 0.0 for value in cpu) / 100.0
    share = None
    if user and None not in user and None not in system:
        busy = sum(value or 0.0 for value in user) + sum(value or 0.0 for value in system)
        share = sum(value or 0.0 for value in system) / busy if busy > 0 else None
    seconds = window_seconds(report.rows)
    runqueue = None
    if measured and None not in waits and seconds is not None:
        runqueue = sum(value or 0.0 for value in waits) / 100.0 * seconds
    elif measured and None in waits:
        notes.append(NO_WAIT)
    workload = WorkloadView(
        ref=Workload(),
        seconds=seconds,
        cpu_used_cores=cores,
        system_share=share,
        threads=len(threads) or None,
        runqueue_wait_seconds=runqueue,
        processes=process_views or None,
        thread_views=thread_views or None,
    )
    cpus = report.system.cpus if report.system else None
    if not measured:
        notes.append("pidstat printed no rows (no such process when it ran)")
    return Part("pidstat", source, NodeView(cpus=cpus), workload if measured else None,
                (*notes, *damage_notes(source, report.damage)))  # fmt: skip
