"""The time budget's live facts against ground truth: a known workload's system calls by family and the time it
slept inside them, read from a real agent's /metrics twice and turned into a WorkloadView (diagnose's path)."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.diagnosis.facts import Workload
from agent.diagnosis.inputs.live.budget_inputs import with_budget_inputs
from agent.diagnosis.inputs.live.window import Window, workload_view
from agent.machine import syscall_families
from agent.series.reading import Reading, read_families
from tests.kernel.test_families import Calls, made, syscaller  # noqa: F401  (syscaller is a fixture)
from tests.support.agent import AgentProcess
from tests.support.workloads import CgroupSandbox
from tests.support.workloads import Workload as Running

RECORD = os.environ.get("SCHEDWATCH_TEST_RECORD_DIR")  # where to keep the two scrapes (the unit tests' fixtures)


@pytest.fixture(scope="module")
def budget_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """An agent timing every workload's calls, with the collectors the budget reads."""
    state = tmp_path_factory.mktemp("budget-agent")
    process = AgentProcess(
        state / "agent.log",
        "--no-collector.syscalls",
        "--collector.syscall_families",
        "--syscall-time",
        "all",
        "--state-dir",
        str(state),
    )
    process.wait_ready()
    yield process
    code = process.stop()
    assert code == 0, f"agent exited with {code} on SIGTERM:\n{process.log()}"


def read(agent: AgentProcess, at: float, name: str) -> Reading:
    with urllib.request.urlopen(agent.url, timeout=60) as answer:
        text = answer.read().decode()
    if RECORD:
        Path(RECORD, name).write_text(text)
    return read_families(text_string_to_metric_families(text), at)


def test_calls_and_seconds_by_family_of_a_known_workload(
    budget_agent: AgentProcess,
    cgroups: CgroupSandbox,
    syscaller: Path,  # noqa: F811
) -> None:
    calls = Calls(clock_gettime=3000, nanosleep=200, sleep_ns=2_000_000, mmap=500, forks=20, getppid=7000)
    empty_group, measured_group = cgroups.make("budget-empty"), cgroups.make("budget")
    before = read(budget_agent, 0.0, "budget-before.txt")
    empty = Running(syscaller, *Calls().argv(empty_group), hold=False).truth
    truth = Running(syscaller, *calls.argv(measured_group), hold=False).truth
    after = read(budget_agent, 1.0, "budget-after.txt")
    window = Window(before, after)
    views = {
        group: with_budget_inputs(window, workload_view(window, Workload(cgroup=cgroups.relative(group)), 2))
        for group in (empty_group, measured_group)
    }
    measured, baseline = views[measured_group], views[empty_group]
    assert measured.syscall_calls_by_family is not None and baseline.syscall_calls_by_family is not None
    assert set(measured.syscall_calls_by_family) == set(syscall_families.FAMILIES)
    grown = {
        family: round(measured.syscall_calls_by_family[family] - baseline.syscall_calls_by_family[family])
        for family in syscall_families.FAMILIES
    }
    assert grown == made(truth) and made(empty) == dict.fromkeys(syscall_families.FAMILIES, 0)
    seconds = measured.syscall_seconds_by_family
    assert seconds is not None
    # Every nanosleep lasts at least its 2 ms; the two clock reads around the loop bound the total from above.
    slept = calls.nanosleep * calls.sleep_ns / 1e9
    assert slept <= seconds[syscall_families.SLEEP] <= truth["slept_ns"] / 1e9 + 0.001, (seconds, truth)
