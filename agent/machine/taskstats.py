"""The kernel's own per-thread CPU delay (taskstats delay accounting) over netlink, read with pyroute2.

A source independent of BPF: it needs ``kernel.task_delayacct=1`` (or ``delayacct`` on the kernel command
line), and counts only delays that happened while accounting was on.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from agent.machine.procfs import ProcFS

DELAYACCT_SYSCTL = Path("/proc/sys/kernel/task_delayacct")


def delay_accounting_enabled() -> bool | None:
    """Whether kernel.task_delayacct is on (None when the kernel has no such sysctl)."""
    text = ProcFS().read_text("sys", "kernel/task_delayacct")
    return None if text is None else text.strip() == "1"


def cpu_delay_seconds(tids: Iterable[int]) -> float:
    """Total time the given threads waited on a run queue, by taskstats' ``cpu_delay_total``."""
    from pyroute2 import TaskStats

    total_ns = 0
    with TaskStats() as taskstats:
        taskstats.bind()
        for tid in tids:
            message = taskstats.get_pid_stat(tid)[0]
            stats = message.get_attr("TASKSTATS_TYPE_AGGR_PID").get_attr("TASKSTATS_TYPE_STATS")
            total_ns += int(stats["cpu_delay_total"])
    return total_ns / 1e9
