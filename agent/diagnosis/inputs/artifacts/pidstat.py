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
"""

from __future__ import annotations

import re

from agent.diagnosis.inputs.artifacts import table
from agent.diagnosis.inputs.artifacts.errors import Malformed
from agent.diagnosis.inputs.artifacts.opening import is_error_message, report_lines
from agent.diagnosis.inputs.artifacts.results import PidstatReport, PidstatRow, SystemLine
from agent.diagnosis.inputs.artifacts.sysstat import is_row, stamp, system_line
from agent.diagnosis.inputs.artifacts.text import Line, lines, trimmed

__all__ = ["FORMAT", "looks_like", "looks_like_error", "parse"]

FORMAT = "pidstat"

_IDS = ("UID", "USER", "PID", "TGID", "TID")
_ERROR = re.compile(r"(pidstat: |Usage: pidstat\b)")
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


def _opens_report(line: Line) -> bool:
    return system_line(line) is not None or _header_columns(line) is not None


def looks_like(text: str) -> bool:
    """True when *text* holds a pidstat column header (``... UID ... PID ... Command``)."""
    return any(_header_columns(line) for line in lines(text))


def looks_like_error(text: str) -> bool:
    """True when *text* is pidstat's own error or usage message and holds no table."""
    return is_error_message(text, looks_like, _is_error)


def _is_error(line: str) -> bool:
    return _ERROR.match(line) is not None


def parse(text: str) -> PidstatReport:
    """Every row in *text*; raises NotThisFormat, CommandFailed or Malformed (see .errors).

    A report whose tables are all empty (pidstat found no such process) is returned with no rows.
    """
    rows = report_lines(text, FORMAT, looks_like, _is_error, "no column header ending in 'Command'")
    system: SystemLine | None = None
    columns: list[str] | None = None
    result: list[PidstatRow] = []
    for line in trimmed(rows, _opens_report, is_row):
        if (found := system_line(line)) is not None:
            system = found
        elif (names := _header_columns(line)) is not None:
            columns = names
        elif columns is None:
            raise Malformed(FORMAT, line.number, f"a row before any column header: {line.text.strip()!r}")
        else:
            result.append(_row(line, columns))
    return PidstatReport(system, tuple(result))


def _row(line: Line, columns: list[str]) -> PidstatRow:
    prefix = stamp(line.fields)
    if prefix is None:
        raise Malformed(FORMAT, line.number, f"a row that starts with neither a time nor 'Average:': {line.text!r}")
    rest = Line(line.number, " ".join(line.fields[prefix.width :]))
    fields = table.split_row(rest, len(columns))
    if len(fields) != len(columns):
        raise Malformed(FORMAT, line.number, f"{len(columns)} columns in the header, {len(fields)} in this row")
    values = dict(zip(columns, fields, strict=True))

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
