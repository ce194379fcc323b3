"""Numbers the rules of the other causes read from a workload's time budget, each None when a fact it needs is
unknown: calls by family per second, CPU in the kernel, and who among its threads and processes does most."""

from __future__ import annotations

from collections.abc import Callable

from agent.diagnosis.facts import ProcessView, ThreadView, WorkloadView

# The families the facts key calls by (agent/machine/syscall_families.py names them;
# tests/unit/diagnosis/rules/test_rules_causes.py checks these are its names): the rules read facts only.
CLOCK, SLEEP, POLL, MEMORY, PROCESS, FILE, NETWORK = "clock", "sleep", "poll", "memory", "process", "file", "network"


def family_rate(workload: WorkloadView, *families: str) -> float | None:
    """Calls per second of *families* together; None when calls by family or the window are unknown."""
    calls = workload.syscall_calls_by_family
    if calls is None:
        return None
    return workload.rate(sum(calls.get(family, 0.0) for family in families))


def calls_share(workload: WorkloadView, *families: str) -> float | None:
    """The share of the workload's system calls in *families*; None when unknown or when it made none."""
    calls = workload.syscall_calls_by_family
    total = sum(calls.values()) if calls else 0.0
    if not calls or total <= 0:
        return None
    return sum(calls.get(family, 0.0) for family in families) / total


def kernel_cores(workload: WorkloadView) -> float | None:
    """CPUs' worth of time in the kernel over the window."""
    return workload.rate(workload.system_seconds)


def busiest_thread(workload: WorkloadView, key: Callable[[ThreadView], float | None]) -> ThreadView | None:
    """The thread (of the read-closely sample) with the largest *key*, None when no thread has one above 0."""
    ranked = [(value, thread) for thread in workload.thread_views or () if (value := key(thread))]
    return max(ranked, key=lambda pair: pair[0])[1] if ranked else None


def thread_name(thread: ThreadView) -> str:
    """'comm' (tid T, pid P) as far as known."""
    where = [f"tid {thread.tid}"] if thread.tid is not None else []
    if thread.pid is not None and thread.pid != thread.tid:
        where.append(f"pid {thread.pid}")
    return f"{thread.comm or '?'}" + (f" ({', '.join(where)})" if where else "")


def process_name(process: ProcessView) -> str:
    """'command' (pid P)."""
    return f"{process.command or process.comm or '?'} (pid {process.pid})"


def busiest_process(workload: WorkloadView, key: Callable[[ProcessView], float | None]) -> ProcessView | None:
    """The process with the largest *key*, None when none has one above 0."""
    ranked = [(value, process) for process in workload.processes or () if (value := key(process))]
    return max(ranked, key=lambda pair: pair[0])[1] if ranked else None


def pid_list(workload: WorkloadView) -> str:
    """The workload's processes for a command line ('PID' when they were not read)."""
    pids = [str(process.pid) for process in workload.processes or ()][:8]
    return ",".join(pids) or "PID"
