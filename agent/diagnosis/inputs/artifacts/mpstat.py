"""``mpstat`` reports (``mpstat -P ALL 1 3``): CPU time shares per CPU and for ``all``, per interval and averaged.

Columns are found by name; sysstat before 9 printed ``%user``/``%system`` for today's ``%usr``/``%sys``, and
before 10 no ``%gnice``. Locales with decimal commas and translated ``Average:`` labels read the same. A sample
recorded on this project's sick workload (sysstat 12.6, ``mpstat -P ALL 1 3``, rows cut here)::

    Linux 6.18.44-fc-v669 (vm) 	12/01/26 	_x86_64_	(2 CPU)

    01:14:18     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
    01:14:19     all   87.68    0.00   12.32    0.00    0.00    0.00    0.00    0.00    0.00    0.00
    01:14:19       0   88.24    0.00   11.76    0.00    0.00    0.00    0.00    0.00    0.00    0.00
    01:14:19       1   87.13    0.00   12.87    0.00    0.00    0.00    0.00    0.00    0.00    0.00

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> [(row.cpu, row.usr, row.sys, row.idle) for row in report.rows]
[('all', 87.68, 12.32, 0.0), ('0', 88.24, 11.76, 0.0), ('1', 87.13, 12.87, 0.0)]

Facts (:func:`to_facts`): node facts only, since mpstat is machine-wide (every process on the host is in it).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.diagnosis.facts import CpuShares, NodeView
from agent.diagnosis.inputs.artifacts import table
from agent.diagnosis.inputs.artifacts.damage import notes as damage_notes
from agent.diagnosis.inputs.artifacts.errors import Malformed
from agent.diagnosis.inputs.artifacts.known import mean_known
from agent.diagnosis.inputs.artifacts.part import MACHINE_WIDE, Part
from agent.diagnosis.inputs.artifacts.sysstat import Report, Tool, named_fields, stamp, stamped
from agent.diagnosis.inputs.artifacts.text import Line

__all__ = ["FORMAT", "MpstatReport", "MpstatRow", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "mpstat"


# --- the records: what the tool printed, nothing inferred -----------------------------------------


@dataclass(frozen=True)
class MpstatRow:
    """One CPU's row of ``mpstat -P ALL`` (*cpu* is ``all`` or the CPU number); shares in percent."""

    time: str | None
    average: bool
    cpu: str
    usr: float | None
    nice: float | None
    sys: float | None
    iowait: float | None
    irq: float | None
    soft: float | None
    steal: float | None
    guest: float | None
    gnice: float | None
    idle: float | None


class MpstatReport(Report[MpstatRow]):
    """An ``mpstat`` report: every CPU row, in the order printed."""


# --- recognising and parsing ----------------------------------------------------------------------

_ALIASES = {"%user": "%usr", "%system": "%sys"}


def _header_columns(line: Line) -> list[str] | None:
    """Column names of an mpstat CPU-utilisation header (time prefix removed); None for any other line."""
    fields = line.fields
    prefix = stamp(fields)
    if prefix is None or len(fields) <= prefix.width + 1:
        return None
    names = [_ALIASES.get(name, name) for name in fields[prefix.width :]]
    return names if names[0] == "CPU" and "%idle" in names else None


MPSTAT = Tool(FORMAT, _header_columns, "no 'CPU %usr ... %idle' header")

looks_like = MPSTAT.looks_like  # the text holds an mpstat header (``... CPU %usr ... %idle``)
looks_like_error = MPSTAT.looks_like_error  # the text is mpstat's own error or usage message, and no table


def parse(text: str) -> MpstatReport:
    """Every CPU row in *text*; raises NotThisFormat, CommandFailed or Malformed (see .errors)."""
    tables = MPSTAT.tables(text, _row)
    if not tables.rows:  # mpstat prints its rows with the header; a header alone was cut short
        raise Malformed(FORMAT, tables.last_line, "no CPU rows under the header (cut short?)")
    return MpstatReport(tables.system, tuple(tables.rows), tuple(tables.damage))


def _row(line: Line, columns: list[str]) -> MpstatRow:
    prefix = stamped(FORMAT, line)
    values = named_fields(FORMAT, line, columns, line.fields[prefix.width :])

    def share(name: str) -> float | None:
        return table.optional_number(FORMAT, line, name, values.get(name))

    return MpstatRow(
        time=prefix.time,
        average=prefix.average,
        cpu=values["CPU"],
        usr=share("%usr"),
        nice=share("%nice"),
        sys=share("%sys"),
        iowait=share("%iowait"),
        irq=share("%irq"),
        soft=share("%soft"),
        steal=share("%steal"),
        guest=share("%guest"),
        gnice=share("%gnice"),
        idle=share("%idle"),
    )


# --- facts: what the records tell the rules -------------------------------------------------------


def _all_cpus(rows: tuple[MpstatRow, ...]) -> list[MpstatRow]:
    together = [row for row in rows if row.cpu.lower() == "all"]
    averages = [row for row in together if row.average]
    return averages or together


def to_facts(report: MpstatReport, source: str) -> Part:
    """CPU shares of the ``all`` row (the Average when printed, else the mean of the intervals), and the CPUs."""
    rows = _all_cpus(report.rows)
    numbered = {row.cpu for row in report.rows if row.cpu.isdigit()}
    cpus = report.system.cpus if report.system and report.system.cpus else (len(numbered) or None)
    shares = None
    if rows:
        shares = CpuShares(
            user=mean_known([row.usr for row in rows]),
            nice=mean_known([row.nice for row in rows]),
            system=mean_known([row.sys for row in rows]),
            idle=mean_known([row.idle for row in rows]),
            iowait=mean_known([row.iowait for row in rows]),
            irq=mean_known([row.irq for row in rows]),
            softirq=mean_known([row.soft for row in rows]),
            steal=mean_known([row.steal for row in rows]),
        )
    said = (MACHINE_WIDE.format(tool=FORMAT), *damage_notes(source, report.damage))
    return Part(FORMAT, source, NodeView(cpus=cpus, cpu=shares), notes=said)
