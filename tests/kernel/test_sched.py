"""Off-CPU time and run-queue latency against sleeps of known length and the kernel's own schedstat."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.scrape import Scrape
from tests.support.workloads import CgroupSandbox, Workload

RUNQ = "schedwatch_runqueue_latency_seconds"


def value(scrape: Scrape, name: str, cgroup: str, **labels: str) -> float:
    found = scrape.value(name, cgroup=cgroup, container_id="", **labels)
    return 0.0 if found is None else found


def schedstat_run_delay(pid: int, tids: list[int]) -> float:
    """Seconds the kernel says these threads waited on a run queue (2nd field of schedstat)."""
    return sum(int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1]) for tid in tids) / 1e9


def test_sleeping_thread_is_blocked_not_preempted(agent: AgentProcess, cgroups: CgroupSandbox, sleeper: Path) -> None:
    group = cgroups.make("sleeper")
    count, sleep_ns = 20, 10_000_000
    workload = Workload(sleeper, group, count, sleep_ns)
    try:
        scrape = agent.scrape()
        path = cgroups.relative(group)
        blocked = value(scrape, "schedwatch_offcpu_seconds_total", path, reason="blocked")
        preempted = value(scrape, "schedwatch_offcpu_seconds_total", path, reason="preempted")
        assert blocked == pytest.approx(count * sleep_ns / 1e9, rel=0.05)
        assert blocked <= workload.truth["slept_ns"] / 1e9 + 0.002
        assert preempted < 0.002, f"a sleeper was preempted for {preempted * 1e3:.1f} ms"
        # Each wake-up is a wait for a CPU, however short.
        assert value(scrape, f"{RUNQ}_count", path) >= count
    finally:
        workload.release()


def test_runqueue_latency_agrees_with_schedstat(agent: AgentProcess, cgroups: CgroupSandbox, spinner: Path) -> None:
    group = cgroups.make("runq")
    workload = Workload(spinner, group, 3, 2.0, 1)  # three CPU-bound threads sharing CPU 1 for 2 s
    try:
        scrape = agent.scrape()
        path = cgroups.relative(group)
        kernel_says = schedstat_run_delay(workload.pid, workload.truth["tids"])
        assert kernel_says > 2.0, "three spinners on one CPU for 2 s should wait about 4 s in all"
        waited = value(scrape, f"{RUNQ}_sum", path)
        assert waited == pytest.approx(kernel_says, rel=0.05)
        preempted = value(scrape, "schedwatch_offcpu_seconds_total", path, reason="preempted")
        assert preempted == pytest.approx(waited, rel=0.10)

        # The histogram is consistent: cumulative buckets, +Inf == count, and most waits are scheduler slices.
        buckets = sorted(
            (float(dict(labels)["le"]), count) for labels, count in scrape.find(f"{RUNQ}_bucket", cgroup=path).items()
        )
        counts = [count for _, count in buckets]
        assert counts == sorted(counts)
        assert buckets[-1] == (float("inf"), value(scrape, f"{RUNQ}_count", path))
        assert counts[-1] > 100

        per_process = scrape.value("schedwatch_process_runqueue_wait_seconds_total", pid=str(workload.pid))
        assert per_process == pytest.approx(waited, rel=0.02)
    finally:
        workload.release()
