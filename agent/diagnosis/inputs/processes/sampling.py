"""Per-process facts from /proc/PID/stat, status, task/*/stat, task/*/status and the exe link; CPU use (and each
thread's voluntary switches, and the CPU of the children a process reaped) from two readings.

/proc/PID/cmdline is never read: arguments can hold secrets. The command is told by comm and the exe's basename.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agent.machine.cpus import parse_cpu_list
from agent.machine.process_stat import CLOCK_TICKS, read_process_stat
from agent.machine.procfs import SMALL_FILE, ProcFS, printable


@dataclass(frozen=True)
class ThreadTicks:
    """CPU time of one thread, in clock ticks."""

    tid: int
    comm: str
    user_ticks: int
    system_ticks: int
    voluntary_switches: int | None = None  # status' voluntary_ctxt_switches: times it left the CPU to wait


@dataclass(frozen=True)
class ProcessFacts:
    """One reading of a process."""

    pid: int
    ppid: int
    comm: str  # printable
    exe_name: str | None  # basename of the exe link, printable; None for kernel threads or when not permitted
    state: str
    threads: int
    user_ticks: int
    system_ticks: int
    start_ticks: int
    affinity: tuple[int, ...]  # CPUs the process may run on (status' Cpus_allowed_list); empty when unknown
    thread_ticks: tuple[ThreadTicks, ...]
    children_ticks: int = 0  # CPU time of the children it reaped, so far

    @property
    def command(self) -> str:
        """What the process runs: the exe's basename when readable, else comm."""
        return self.exe_name if self.exe_name else self.comm


def affinity_from_status(status: str) -> tuple[int, ...]:
    """CPUs in the Cpus_allowed_list line of /proc/PID/status; empty when absent or malformed."""
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            try:
                return parse_cpu_list(line.split(":", 1)[1])
            except ValueError:
                return ()
    return ()


def voluntary_switches(status: str) -> int | None:
    """The voluntary_ctxt_switches line of a /proc/PID/status (or task/TID/status); None when absent."""
    for line in status.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            value = line.split(":", 1)[1].strip()
            return int(value) if value.isdigit() else None
    return None


def read_process(procfs: ProcFS, pid: int) -> ProcessFacts | None:
    """One reading of *pid*; None when it is gone."""
    stat = read_process_stat(procfs, pid)
    if stat is None:
        return None
    status = procfs.read_text(pid, "status", SMALL_FILE) or ""
    exe = procfs.readlink(pid, "exe")
    threads = []
    for tid in sorted(procfs.tids(pid)):
        thread = read_process_stat(procfs, pid, tid)
        if thread is not None:
            switches = voluntary_switches(procfs.read_text(pid, f"task/{tid}/status", SMALL_FILE) or "")
            threads.append(ThreadTicks(tid, thread.comm, thread.user_ticks, thread.system_ticks, switches))
    return ProcessFacts(
        pid=pid,
        ppid=stat.ppid,
        comm=stat.comm,
        exe_name=None if not exe else printable(_basename(exe)),
        state=stat.state,
        threads=stat.threads,
        user_ticks=stat.user_ticks,
        system_ticks=stat.system_ticks,
        start_ticks=stat.start_ticks,
        affinity=affinity_from_status(status),
        thread_ticks=tuple(threads),
        children_ticks=stat.children_ticks,
    )


def _basename(link: str) -> str:
    deleted = " (deleted)"
    path = link[: -len(deleted)] if link.endswith(deleted) else link
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ThreadUsage:
    """CPU use of one thread between two readings, in percent of one CPU."""

    tid: int
    comm: str
    user_percent: float
    system_percent: float
    voluntary_switches_per_second: float | None = None


@dataclass(frozen=True)
class CpuUsage:
    """CPU use of one process between two readings, in percent of one CPU (200 = two CPUs busy)."""

    pid: int
    user_percent: float
    system_percent: float
    threads: tuple[ThreadUsage, ...]  # the threads alive at both readings
    children_percent: float = 0.0  # CPU of the children it reaped between the readings

    @property
    def percent(self) -> float:
        """User and system together."""
        return self.user_percent + self.system_percent


def cpu_usage(before: ProcessFacts, after: ProcessFacts, seconds: float) -> CpuUsage | None:
    """CPU use between two readings of one process *seconds* apart; None when the pid now names another process."""
    if before.pid != after.pid or before.start_ticks != after.start_ticks or seconds <= 0:
        return None
    scale = 100.0 / (CLOCK_TICKS * seconds)
    earlier = {thread.tid: thread for thread in before.thread_ticks}
    threads = tuple(
        ThreadUsage(
            thread.tid,
            thread.comm,
            max(0, thread.user_ticks - earlier[thread.tid].user_ticks) * scale,
            max(0, thread.system_ticks - earlier[thread.tid].system_ticks) * scale,
            _switch_rate(earlier[thread.tid].voluntary_switches, thread.voluntary_switches, seconds),
        )
        for thread in after.thread_ticks
        if thread.tid in earlier
    )
    return CpuUsage(
        pid=after.pid,
        user_percent=max(0, after.user_ticks - before.user_ticks) * scale,
        system_percent=max(0, after.system_ticks - before.system_ticks) * scale,
        threads=threads,
        children_percent=max(0, after.children_ticks - before.children_ticks) * scale,
    )


def _switch_rate(before: int | None, after: int | None, seconds: float) -> float | None:
    return None if before is None or after is None else max(0, after - before) / seconds


@dataclass(frozen=True)
class ProcessSample:
    """Two readings of a set of processes: the second one, and the CPU use between them."""

    processes: tuple[ProcessFacts, ...]
    usage: dict[int, CpuUsage]
    seconds: float


def sample(
    procfs: ProcFS,
    pids: Iterable[int],
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ProcessSample:
    """Read *pids*, wait *interval* seconds, read them again. Processes gone meanwhile are left out."""
    wanted = sorted(set(pids))
    started = clock()
    first = {facts.pid: facts for facts in (read_process(procfs, pid) for pid in wanted) if facts is not None}
    sleep(interval)
    seconds = clock() - started
    second = [facts for facts in (read_process(procfs, pid) for pid in first) if facts is not None]
    usage = {}
    for facts in second:
        used = cpu_usage(first[facts.pid], facts, seconds)
        if used is not None:
            usage[facts.pid] = used
    return ProcessSample(tuple(second), usage, seconds)
