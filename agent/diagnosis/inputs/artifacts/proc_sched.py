"""``/proc/PID/sched`` (CFS's per-task debug file): the ``comm (PID, #threads: N)`` header and its ``key : value``
lines, with schedstats (``se.statistics.wait_sum``, or ``wait_sum`` on newer kernels) or without. From a public
pull request (intel/workload-collocation-agent#533, lines cut here)::

    systemd (1, #threads: 1)
    -------------------------------------------------------------------
    se.sum_exec_runtime                          :        236416.940623
    nr_switches                                  :               898786
    nr_voluntary_switches                        :               897030
    nr_involuntary_switches                      :                 1756

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.comm, report.pid, report.threads, report.run_ms, report.involuntary_switches, report.wait_ms)
('systemd', 1, 1, 236416.940623, 1756, None)

Facts (:func:`to_facts`): the process's threads, its voluntary and involuntary switches and, with schedstats, the
time its main thread waited runnable for a CPU (``wait_sum``), all since the thread started: no window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, ProcessView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import decimal, is_decimal, lines, unquoted

__all__ = ["FORMAT", "ProcSched", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "/proc/PID/sched"

_HEADER = re.compile(r"^(?P<comm>.+?) \((?P<pid>\d+), #threads: (?P<threads>\d+)\)$")
_FIELD = re.compile(r"^(?P<key>[\w.>-]+)\s+:\s+(?P<value>-?[\d.]+)$")


@dataclass(frozen=True)
class ProcSched:
    """The fields of one sched file schedwatch reads (None where not shown)."""

    comm: str | None
    pid: int | None
    threads: int | None
    run_ms: float | None  # se.sum_exec_runtime
    voluntary_switches: int | None
    involuntary_switches: int | None
    wait_ms: float | None  # wait_sum: runnable, waiting for a CPU (schedstats on)
    waits: int | None  # wait_count
    skipped: int


def looks_like(text: str) -> bool:
    """True when *text* has the ``comm (PID, #threads: N)`` header and ``se.`` fields."""
    rows = [unquoted(line.text) for line in lines(text)]
    return any(_HEADER.match(row) for row in rows) and any(row.startswith("se.") and ":" in row for row in rows)


def looks_like_error(text: str) -> bool:
    """``cat: /proc/123/sched: No such file or directory``."""
    first = next((unquoted(line.text) for line in lines(text) if line.text.strip()), "")
    return bool(re.match(r"^cat: /proc/\d+/(?:task/\d+/)?sched: ", first))


def parse(text: str) -> ProcSched:
    """The sched fields in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `comm (PID, #threads: N)` header with se.* fields")
    header = None
    fields: dict[str, float] = {}
    skipped = 0
    for line in lines(text):
        row = unquoted(line.text)
        if not row or set(row) == {"-"}:
            continue
        if header is None and (match := _HEADER.match(row)) is not None:
            header = match
            continue
        field = _FIELD.match(row)
        if field is None or not is_decimal(field["value"].lstrip("-")):
            skipped += 1
            continue
        fields.setdefault(field["key"].removeprefix("se.statistics.").removeprefix("stats."), decimal(field["value"]))

    def count(key: str) -> int | None:
        return int(fields[key]) if key in fields else None

    return ProcSched(
        header["comm"] if header else None,
        int(header["pid"]) if header else None,
        int(header["threads"]) if header else None,
        fields.get("se.sum_exec_runtime"),
        count("nr_voluntary_switches"),
        count("nr_involuntary_switches"),
        fields.get("wait_sum"),
        count("wait_count"),
        skipped,
    )


def to_facts(report: ProcSched, source: str) -> Part:
    """Threads, switches and (with schedstats) the time waited for a CPU, since the thread started."""
    processes = None
    if report.pid is not None:
        processes = (ProcessView(report.pid, comm=report.comm, threads=report.threads),)
    workload = WorkloadView(
        ref=Workload(),
        threads=report.threads,
        voluntary_switches=report.voluntary_switches,
        involuntary_switches=report.involuntary_switches,
        runqueue_wait_seconds=None if report.wait_ms is None else report.wait_ms / 1000,
        processes=processes,
    )
    notes = ["/proc/PID/sched counts since the thread started, for that thread only: no window, so no rates"]
    if report.wait_ms is None:
        notes.append(f"{source}: no wait_sum (schedstats off, or not pasted): time waiting for a CPU unknown")
    if report.skipped:
        notes.append(f"{source}: {report.skipped} lines that are not sched fields skipped")
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
