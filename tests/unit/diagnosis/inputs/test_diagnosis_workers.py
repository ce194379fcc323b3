"""Pool workers grouped under their parent, from /proc trees of real processes."""

from __future__ import annotations

import dataclasses

from agent.diagnosis.inputs.processes.sampling import ProcessFacts, read_process
from agent.diagnosis.inputs.processes.workers import WorkerPool, worker_pools
from agent.machine.procfs import ProcFS
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "proc-diagnosis"


def processes(case: str) -> list[ProcessFacts]:
    procfs = ProcFS(FIXTURES / case)
    found = [read_process(procfs, pid) for pid in sorted(procfs.pids())]
    assert None not in found
    return [facts for facts in found if facts is not None]


def test_numpy126_pool_is_two_workers_under_the_parent() -> None:
    assert worker_pools(processes("numpy126")) == [WorkerPool(27200, "python3.11", ("python",), (27223, 27224))]


def test_two_pools_side_by_side_stay_apart() -> None:
    """Both pools were started from one shell (pid 27196): their two parents are a group of that shell too."""
    pools = worker_pools(processes("numpy126") + processes("numpy2"))
    assert [(pool.parent_pid, pool.pids) for pool in pools] == [
        (27196, (27200, 27571)),
        (27200, (27223, 27224)),
        (27571, (27634, 27635)),
    ]


def test_lone_processes_are_no_pool() -> None:
    assert worker_pools(processes("libgomp") + processes("plain")) == []


def test_workers_that_name_themselves_are_one_pool_by_their_exe() -> None:
    workers = [
        dataclasses.replace(facts, comm=f"worker-{index}") for index, facts in enumerate(processes("numpy126")[1:])
    ]
    (pool,) = worker_pools(workers)
    assert pool.comms == ("worker-0", "worker-1")
    assert pool.size == 2


def test_without_a_readable_exe_the_command_is_comm() -> None:
    workers = [dataclasses.replace(facts, exe_name=None) for facts in processes("numpy126")[1:]]
    assert worker_pools(workers)[0].command == "python"


def test_a_larger_minimum_leaves_small_groups_out() -> None:
    assert worker_pools(processes("numpy126"), minimum=3) == []
