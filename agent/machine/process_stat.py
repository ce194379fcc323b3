"""The one parser of /proc/PID/stat (and /proc/PID/task/TID/stat): the fields the agent reads, by proc(5) number."""

from __future__ import annotations

import os
from dataclasses import dataclass

from agent.machine.procfs import SMALL_FILE, ProcFS, printable

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # the unit of utime, stime and starttime


@dataclass(frozen=True)
class ProcessStat:
    """The fields of a /proc/PID/stat line used by the agent."""

    comm: str  # printable
    state: str
    ppid: int
    flags: int  # PF_* of the task (PF_EXITING once it has begun to exit)
    user_ticks: int
    system_ticks: int
    children_ticks: int  # user + system time of the children it waited for (cutime + cstime)
    threads: int
    start_ticks: int  # since boot: with the pid, names one process across pid reuse
    virtual_bytes: int
    resident_pages: int


def parse_process_stat(text: str) -> ProcessStat | None:
    """A stat line; None when it is not one. comm is between the first '(' and the last ')', and may hold both."""
    opened = text.find("(")
    closed = text.rfind(")")
    if opened < 0 or closed < opened:
        return None
    fields = text[closed + 1 :].split()
    # fields[0] is field 3 of proc(5): state; ppid 4, flags 9, utime 14, stime 15, cutime 16, cstime 17,
    # num_threads 20, starttime 22, vsize 23, rss 24 (pages).
    if len(fields) < 22:
        return None
    try:
        return ProcessStat(
            comm=printable(text[opened + 1 : closed]),
            state=fields[0],
            ppid=int(fields[1]),
            flags=int(fields[6]),
            user_ticks=int(fields[11]),
            system_ticks=int(fields[12]),
            children_ticks=int(fields[13]) + int(fields[14]),
            threads=int(fields[17]),
            start_ticks=int(fields[19]),
            virtual_bytes=int(fields[20]),
            resident_pages=int(fields[21]),
        )
    except ValueError:
        return None


def read_process_stat(procfs: ProcFS, pid: int | str, tid: int | None = None) -> ProcessStat | None:
    """/proc/PID/stat (or /proc/PID/task/TID/stat) now; None when the process is gone or the line is not one."""
    text = procfs.read_text(pid, "stat" if tid is None else f"task/{tid}/stat", SMALL_FILE)
    return None if text is None else parse_process_stat(text)
