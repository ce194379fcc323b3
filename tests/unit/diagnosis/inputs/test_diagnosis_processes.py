"""Per-process facts and CPU use from /proc trees of real processes (tests/unit/fixtures/proc-diagnosis)."""

from __future__ import annotations

import json

import pytest

from agent.diagnosis.inputs.processes.sampling import ProcessFacts, cpu_usage, read_process, sample
from agent.machine.node_stat import read_proc_stat
from agent.machine.process_stat import CLOCK_TICKS, parse_process_stat
from agent.machine.procfs import ProcFS
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "proc-diagnosis"


def reading(case: str, pid: int) -> ProcessFacts:
    facts = read_process(ProcFS(FIXTURES / case), pid)
    assert facts is not None
    return facts


def elapsed_on_cpu(case: str, cpu: int) -> float:
    """Seconds between a case's two readings, told by the node's own ticks of one CPU (every state counted)."""
    before = read_proc_stat(ProcFS(FIXTURES / case)).cpus[cpu]
    after = read_proc_stat(ProcFS(FIXTURES / f"{case}-later")).cpus[cpu]
    return (after.total - before.total) / CLOCK_TICKS


def test_numpy126_pool_parent_and_workers() -> None:
    parent = reading("numpy126", 27200)
    assert (parent.pid, parent.comm, parent.exe_name, parent.command) == (27200, "python", "python3.11", "python3.11")
    status = ProcFS(FIXTURES / "numpy126").read_text(27200, "status") or ""
    assert "Threads:\t4\n" in status  # stat's count, status' and task/'s agree
    assert parent.threads == 4 == len(parent.thread_ticks)
    assert [thread.tid for thread in parent.thread_ticks] == [27200, 27225, 27226, 27227]
    assert parent.affinity == (0, 1)
    assert parent.ppid != 27200
    report = json.loads((FIXTURES / "numpy126" / "workload.json").read_text())
    for pid, worker in report["workers"].items():
        facts = reading("numpy126", int(pid))
        assert facts.ppid == 27200
        assert facts.threads == worker["threads"] == worker["blas"][0]["num_threads"] == 2
        assert facts.state in ("R", "S")


def test_libgomp_threads_and_affinity_from_taskset() -> None:
    facts = reading("libgomp", 29530)
    report = json.loads((FIXTURES / "libgomp" / "workload.json").read_text())
    assert facts.threads == report["threads"] == 3
    assert facts.comm == facts.exe_name == "openmp_pool"
    assert facts.affinity == (1,)


def test_libgomp_cpu_use_is_user_time_shared_evenly_by_its_three_threads() -> None:
    """Pinned to CPU 1, the process can use at most what CPU 1 was busy; OpenMP threads spin in user space."""
    seconds = elapsed_on_cpu("libgomp", 1)
    assert 1.0 < seconds < 2.0
    before, after = reading("libgomp", 29530), reading("libgomp-later", 29530)
    usage = cpu_usage(before, after, seconds)
    assert usage is not None
    assert usage.system_percent == 0
    assert 10 < usage.user_percent <= 100
    assert [thread.tid for thread in usage.threads] == [29530, 29532, 29533]
    assert sum(thread.user_percent for thread in usage.threads) == pytest.approx(usage.user_percent)
    for thread in usage.threads:
        assert thread.system_percent == 0
        assert 0.25 < thread.user_percent / usage.user_percent < 0.42, usage.threads


def test_numpy126_workers_burn_cpu_the_parent_waits() -> None:
    """The CPUs were shared with other tests when this was captured: the workers got about a quarter of a CPU."""
    seconds = elapsed_on_cpu("numpy126", 0)
    parent = cpu_usage(reading("numpy126", 27200), reading("numpy126-later", 27200), seconds)
    assert parent is not None and parent.percent == 0
    for pid in (27223, 27224):
        worker = cpu_usage(reading("numpy126", pid), reading("numpy126-later", pid), seconds)
        assert worker is not None
        assert 10 < worker.percent < 200
        assert worker.user_percent > 5 * worker.system_percent


def test_a_reused_pid_gives_no_cpu_use() -> None:
    before = reading("libgomp", 29530)
    reborn = ProcessFacts(**{**before.__dict__, "start_ticks": before.start_ticks + 1})
    assert cpu_usage(before, reborn, 1.0) is None


def test_sample_reads_twice_around_the_interval() -> None:
    slept = []
    times = iter([10.0, 12.5])
    taken = sample(ProcFS(FIXTURES / "libgomp"), [29530, 424242], 2.0, clock=lambda: next(times), sleep=slept.append)
    assert slept == [2.0]
    assert taken.seconds == 2.5
    assert [facts.pid for facts in taken.processes] == [29530]  # the pid that does not exist is left out
    assert taken.usage[29530].percent == 0  # the same files read twice


def test_stat_with_a_comm_holding_parentheses_and_spaces() -> None:
    line = "77 (a) b) (c) S 1 77 77 0 -1 4194304 100 0 0 0 12 34 0 0 20 0 5 0 999 1000 10 0"
    stat = parse_process_stat(line)
    assert stat is not None
    assert (stat.comm, stat.state, stat.ppid, stat.user_ticks, stat.system_ticks, stat.threads, stat.start_ticks) == (
        "a) b) (c",
        "S",
        1,
        12,
        34,
        5,
        999,
    )
    assert (stat.virtual_bytes, stat.resident_pages, stat.flags) == (1000, 10, 4194304)


def test_a_short_or_broken_stat_is_none() -> None:
    assert parse_process_stat("77 (x) S 1 2 3") is None
    assert parse_process_stat("garbage") is None
