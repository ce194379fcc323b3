"""``mpstat -P ALL`` and ``vmstat`` -> node facts (both are machine-wide: every process on the host is in them)."""

from __future__ import annotations

from agent.diagnosis.facts import CpuShares, NodeView
from agent.diagnosis.inputs.artifacts.results import MpstatReport, MpstatRow, VmstatReport
from agent.diagnosis.inputs.offline.known import mean_known
from agent.diagnosis.inputs.offline.part import Part

MACHINE_WIDE = "{tool} is machine-wide: its CPU shares include every process on the host, not only the workload"


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
            user=mean_known([row.usr for row in rows]),
            nice=mean_known([row.nice for row in rows]),
            system=mean_known([row.sys for row in rows]),
            idle=mean_known([row.idle for row in rows]),
            iowait=mean_known([row.iowait for row in rows]),
            irq=mean_known([row.irq for row in rows]),
            softirq=mean_known([row.soft for row in rows]),
            steal=mean_known([row.steal for row in rows]),
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
        user=mean_known([row.us for row in rows]),
        system=mean_known([row.sy for row in rows]),
        idle=mean_known([row.id for row in rows]),
        iowait=mean_known([row.wa for row in rows]),
        steal=mean_known([row.st for row in rows]),
    )
    node = NodeView(
        cpu=shares,
        run_queue=mean_known([row.r for row in rows]),
        context_switches_per_second=mean_known([row.cs for row in rows]),
    )
    return Part("vmstat", source, node, notes=tuple(notes))
