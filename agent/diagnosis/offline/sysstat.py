"""``mpstat -P ALL`` and ``vmstat`` -> node facts (both are machine-wide: every process on the host is in them)."""

from __future__ import annotations

import statistics

from agent.artifacts.results import MpstatReport, MpstatRow, VmstatReport
from agent.diagnosis.offline.part import Part
from agent.diagnosis.views import CpuShares, NodeView

MACHINE_WIDE = "{tool} is machine-wide: its CPU shares include every process on the host, not only the workload"


def _mean(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.fmean(known) if known else None


def _all_cpus(rows: tuple[MpstatRow, ...]) -> list[MpstatRow]:
    together = [row for row in rows if row.cpu.lower() == "all"]
    averages = [row for row in together if row.average]
    return averages or together


def mpstat_part(report: MpstatReport, source: str) -> Part:
    """CPU shares of the ``all`` row (the Average when printed, else the mean of the intervals), and the CPUs."""
    rows = _all_cpus(report.rows)
    numbered = {row.cpu for row in report.rows if row.cpu.isdigit()}
    cpus = report.system.cpus if report.system and report.system.cpus else (len(numbered) or None)
    shares = None
    if rows:
        shares = CpuShares(
            user=_mean([row.usr for row in rows]),
            nice=_mean([row.nice for row in rows]),
            system=_mean([row.sys for row in rows]),
            idle=_mean([row.idle for row in rows]),
            iowait=_mean([row.iowait for row in rows]),
            irq=_mean([row.irq for row in rows]),
            softirq=_mean([row.soft for row in rows]),
            steal=_mean([row.steal for row in rows]),
        )
    return Part("mpstat", source, NodeView(cpus=cpus, cpu=shares), notes=(MACHINE_WIDE.format(tool="mpstat"),))


def vmstat_part(report: VmstatReport, source: str) -> Part:
    """Run queue, context switches and CPU shares: the mean of the intervals (the first line is since boot)."""
    rows = [row for row in report.rows if not row.since_boot]
    notes = [MACHINE_WIDE.format(tool="vmstat")]
    if not rows:
        rows = list(report.rows)
        notes.append("vmstat printed only its first line: averages since boot, not the present")
    shares = CpuShares(
        user=_mean([row.us for row in rows]),
        system=_mean([row.sy for row in rows]),
        idle=_mean([row.id for row in rows]),
        iowait=_mean([row.wa for row in rows]),
        steal=_mean([row.st for row in rows]),
    )
    node = NodeView(
        cpu=shares,
        run_queue=_mean([row.r for row in rows]),
        context_switches_per_second=_mean([row.cs for row in rows]),
    )
    return Part("vmstat", source, node, notes=tuple(notes))
