"""Every place a fix fills in a count takes it from what was counted, never from an assumption: the pool fix's workers
and CPUs (node-side, through Prometheus, offline), the saturation fix's CPUs, the census behind
schedwatch_pool_workers, and the count `schedwatch verify` tries. Where a number is unknown, the fix gives the formula
and says what would give it (issue 31: a pool whose processes were gone when read got "1 worker x 2 threads")."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agent.diagnosis import rules
from agent.diagnosis.facts import CodeShare, Facts, LibraryView, NodeView, ProcessView, WorkloadView
from agent.diagnosis.findings import Cause, Finding
from agent.diagnosis.inputs.processes.access import Access
from agent.diagnosis.inputs.processes.census import pool_workers
from agent.diagnosis.inputs.processes.environment import ThreadEnvironment
from agent.diagnosis.inputs.processes.libraries import Library
from agent.diagnosis.inputs.processes.sampling import ProcessFacts, ProcessSample
from agent.diagnosis.inputs.processes.workers import WorkerPool
from agent.diagnosis.inputs.processes.workload import ProcessDetail, WorkloadFacts
from agent.diagnosis.rules.fixes import CPUS_UNKNOWN, WORKERS_UNKNOWN, runqueue_fix
from agent.machine.process_stat import read_process_stat
from agent.machine.procfs import ProcFS
from agent.verification.fix import recommend
from agent.verification.runner import Counts, Run
from tests.unit.diagnosis.rules.test_rules import NODE, WORKERS, busy, perf_trace_threads, workers

STORM = {"sched_yield_calls": 7_800_000.0, "system_share": 0.37, "runqueue_wait_seconds": 25.0}
# The code rows of the pool: OpenBLAS's spin loop on the CPUs, though its processes were not read.
OPENBLAS_ROWS = {
    "cpu_samples": (CodeShare("libopenblas64_p-r0.3.23.dev.so", "blas_thread_server", "user", 400),),
    "cpu_samples_total": 500,
}


def pool_finding(view: WorkloadView, node: NodeView = NODE) -> Finding:
    found = [f for f in rules.diagnose(Facts(node, (view,))).findings if f.cause is Cause.THREAD_POOL_OVERSUBSCRIPTION]
    assert len(found) == 1, found
    return found[0]


def text_of(finding: Finding) -> str:
    return " ".join((finding.fix.summary, *finding.fix.steps))


def test_processes_read_but_none_left_give_the_formula_not_one_worker() -> None:
    """The issue's case: the yields and the code rows name OpenBLAS's pool, but no process was left to read."""
    view = busy(**STORM, **OPENBLAS_ROWS, processes=(), pools=(), libraries=(), threads=0)
    finding = pool_finding(view)
    assert finding.fix.threads_per_process is None
    assert finding.fix.variables == {}
    assert "N = 2 CPUs / its pool workers, at least 1" in finding.fix.summary
    assert f"For N: {WORKERS_UNKNOWN}." in finding.fix.steps
    assert "1 worker x" not in text_of(finding) and "2 threads" not in text_of(finding)


def test_the_pools_parent_maps_the_library_but_is_not_a_worker() -> None:
    """4 workers under pid 100, which maps OpenBLAS too: 4 workers x 1 thread on 2 CPUs (it said 5 workers)."""
    pooled = workers("openblas")
    parent = ProcessView(100, 1, "python", "python3.11", 4, 3.0, 1.0, (0, 1), ("openblas",), ())
    libraries = (LibraryView("blas", "openblas", "0.3.23.dev", (100, *pooled["libraries"][0].pids)),)
    view = busy(**STORM, processes=(parent, *pooled["processes"]), pools=pooled["pools"], libraries=libraries)
    finding = pool_finding(view)
    assert finding.fix.threads_per_process == 1
    assert "so that 4 workers x 1 thread fit 2 CPUs" in finding.fix.steps[0], finding.fix.steps
    assert f"For N: {WORKERS_UNKNOWN}." not in finding.fix.steps


def test_counted_workers_and_cpus_fill_the_count_in() -> None:
    finding = pool_finding(busy(**STORM, cpus_allowed=16.0, **workers("openblas")))
    assert finding.fix.threads_per_process == 4
    assert "so that 4 workers x 4 threads fit 16 CPUs" in finding.fix.steps[0]
    assert not any(step.startswith("For N:") for step in finding.fix.steps)


def test_unknown_cpus_give_the_formula_with_the_counted_workers() -> None:
    """perf trace of a pool on a machine whose CPUs were not saved: 4 workers, 3 threads each spinning."""
    view = busy(**STORM, cpus_allowed=None, thread_views=perf_trace_threads([5_119_771] * 12), **workers("openblas"))
    finding = pool_finding(view, node=NodeView())
    assert finding.fix.threads_per_process is None
    assert "N = the CPUs it may use / 4 workers, at least 1" in finding.fix.summary
    assert f"For N: {CPUS_UNKNOWN}." in finding.fix.steps
    assert WORKERS_UNKNOWN not in text_of(finding)


def test_a_view_without_processes_takes_the_workers_its_node_counted() -> None:
    """Through Prometheus: schedwatch_pool_workers, else the formula (test_fleet_pool_fix.py has both)."""
    view = dataclasses.replace(busy(**STORM), processes=None, pools=None, libraries=None, pool_workers=4)
    assert "so that 4 workers x 1 thread fit 2 CPUs" in pool_finding(view).fix.steps[0]


def test_saturation_fix_counts_workers_from_the_cpus_only_when_known() -> None:
    known = runqueue_fix(2.0, 4.5)
    assert known.summary == "4.5 threads on average want 2 CPUs: run at most 2 CPU-bound workers, or give it more CPUs."
    unknown = runqueue_fix(None, 4.5)
    assert "at most one CPU-bound worker per CPU it may use" in unknown.summary
    assert f"For the count: {CPUS_UNKNOWN}." in unknown.steps
    assert not any(char.isdigit() for char in unknown.steps[0]), unknown.steps


# --- the census behind schedwatch_pool_workers, on real processes -------------------------------------------------


@pytest.fixture
def two_pools() -> Iterator[list[int]]:
    """Two parents (Python processes) with 3 and 2 children each, all one command: pids of all seven."""
    script = (
        "import subprocess, sys, time; n = int(sys.argv[1]); "
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']) for _ in range(n)]; "
        "print(' '.join(str(k.pid) for k in kids), flush=True); time.sleep(60)"
    )
    # Each parent under a shell of its own, so that the two parents are no pool of this process's children.
    shells = [
        subprocess.Popen(
            ["sh", "-c", '"$@" & wait', "sh", sys.executable, "-c", script, str(n)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for n in (3, 2)
    ]
    pids = []
    for shell in shells:
        assert shell.stdout is not None
        kids = [int(pid) for pid in shell.stdout.readline().split()]
        stat = read_process_stat(ProcFS(), kids[0])
        assert stat is not None
        pids += [stat.ppid, *kids]
    yield pids
    for shell in shells:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()


def test_the_census_counts_the_workers_of_every_pool(two_pools: list[int]) -> None:
    assert pool_workers(ProcFS(), two_pools) == 5


def test_the_census_does_not_make_up_a_worker_for_processes_in_no_pool() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # This process and its child: different parents and commands' groups, no pool; which runs a thread pool is
        # not known without their maps.
        assert pool_workers(ProcFS(), [os.getpid(), child.pid]) is None
    finally:
        child.kill()
        child.wait()


# --- schedwatch verify ---------------------------------------------------------------------------------------------


def first_run() -> Run:
    counts = Counts(7_800_000, {"wait": 10, "wake": 10}, 1.0, 25.0, 20.0)
    return Run("as is", 1, {}, 0, 10.0, 12.0, 7.0, counts, 13)


def test_verify_says_the_count_it_tries_was_not_counted() -> None:
    """A pool finding without workers (none of its processes left to read): verify tries 1 thread per process and
    says why, instead of presenting it as the diagnosis's count."""
    facts = WorkloadFacts(ProcessSample((), {}, 1.0), (), {})
    chosen = recommend(first_run(), facts, 2.0, None)
    assert chosen.variables["OPENBLAS_NUM_THREADS"] == "1"
    assert "found an oversubscribed pool but no workers to size it by" in chosen.source, chosen.source


def test_verify_takes_the_count_of_the_diagnosis_when_it_has_one() -> None:
    """Four workers of one parent mapping OpenBLAS, on 2 CPUs: the diagnosis's 1 thread per worker."""
    blas = Library("blas", "openblas", "/x/libopenblas64_p-r0.3.23.dev.so", "0.3.23.dev", "file name")
    read = ThreadEnvironment(Access.READ, ())
    processes = tuple(ProcessFacts(pid, 100, "python", "python3.11", "R", 3, 0, 0, 0, (0, 1), ()) for pid in WORKERS)
    details = {pid: ProcessDetail(pid, Access.READ, (blas,), read) for pid in WORKERS}
    pool = WorkerPool(100, "python3.11", ("python",), WORKERS)
    facts = WorkloadFacts(ProcessSample(processes, {}, 1.0), (pool,), details)
    chosen = recommend(first_run(), facts, 2.0, None)
    assert chosen.variables["OPENBLAS_NUM_THREADS"] == "1"
    assert chosen.source == (
        "the diagnosis of the first run: Limit each worker's thread pool to 1 thread (OPENBLAS_NUM_THREADS, "
        "OMP_NUM_THREADS)."
    ), chosen.source
