"""The pool fix from series of another machine: the workers the node counted (schedwatch_pool_workers), else the
formula, never an assumed 1 worker; and the count itself, on real processes."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agent.diagnosis.facts import WorkloadView
from agent.diagnosis.inputs.processes.census import pool_workers
from agent.diagnosis.rules.fixes import pool_fix
from agent.machine.procfs import ProcFS
from tests.unit.diagnosis.report_samples import sick_workload


def from_prometheus(workers: int | None) -> WorkloadView:
    """The sick workload as Prometheus has it: no processes, pools or libraries read."""
    return dataclasses.replace(sick_workload(), processes=None, pools=None, libraries=None, pool_workers=workers)


def test_counted_workers_size_the_fix() -> None:
    fix = pool_fix(from_prometheus(4), 2.0, None, None, spin=False)
    assert fix.threads_per_process == 1
    assert "so that 4 workers x 1 thread fit 2 CPUs" in fix.steps[0]


def test_uncounted_workers_give_the_formula_not_one_worker() -> None:
    fix = pool_fix(from_prometheus(None), 2.0, None, None, spin=False)
    assert fix.threads_per_process is None
    assert fix.variables == {}
    assert "N = 2 CPUs / its pool workers, at least 1" in fix.summary
    assert "1 worker x" not in " ".join(fix.steps)
    assert any(step.startswith("For N: its pool workers were not counted here") for step in fix.steps), fix.steps


@pytest.fixture
def three_children() -> Iterator[list[int]]:
    """A parent (this process) with 3 children running one command (sleep, forked from one Python)."""
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(3)]
    yield [child.pid for child in children]
    for child in children:
        child.kill()
        child.wait()


def test_pool_workers_counts_the_children_of_one_parent_and_command(three_children: list[int]) -> None:
    assert pool_workers(ProcFS(), [os.getpid(), *three_children]) == 3


def test_a_lone_process_is_one_worker_and_none_alive_is_unknown() -> None:
    assert pool_workers(ProcFS(), [os.getpid()]) == 1
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert pool_workers(ProcFS(), [gone.pid]) is None
