"""``pidstat`` (``-t``) -> facts: CPU of each process and thread, the workload's CPU and system share, and the
time threads waited for a CPU (``%wait``), over the window the report's times span."""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable

from agent.diagnosis.facts import NodeView, ProcessView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.results import PidstatReport, PidstatRow
from agent.diagnosis.inputs.offline.known import mean_known
from agent.diagnosis.inputs.offline.part import Part

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


def to_part(report: PidstatReport, source: str) -> Part:
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
    return Part("pidstat", source, NodeView(cpus=cpus), workload if measured else None, tuple(notes))
