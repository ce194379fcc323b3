"""A workload's threads, processes, pool workers and thread-pool libraries come from the hierarchy it is identified
by, in whatever cgroup layout the machine has: cgroup2 where it is mounted (v2-only and hybrid hosts), else the v1
workload hierarchy (systemd's named tree where mounted, as on CentOS 7; else the cpu controller's).

The numpy 1.26 pool of 4 workers is placed in that hierarchy only. On a hybrid host that leaves it in no v1 cpu
cgroup of its own; on a v1 host with systemd's tree, in no cpu cgroup of its own, as a systemd service without CPU
accounting is. Issue 31: so placed, `schedwatch diagnose` reported 0 threads, no processes, no pool library mapped
(though its code rows named OpenBLAS's pool) and a fix for "1 worker x 2 threads" it had made up.

The layout is read, never assumed: this module runs as it is on this host, in the platform tier's VMs (cgroup v2
only, v1 only, PREEMPT_RT), and in a v1-only view of this host (`scripts/layout-view.sh v1 CMD`: the cgroup2 mount
hidden in a mount namespace of its own). The fix's check needs 2 CPUs or more: on one, OpenBLAS starts no pool to
oversubscribe. Diagnose reads the session's agent (`--from`): the census is its own either way, and an emulated
machine compiles the programs once, for the agent. The pool's work starts inside the window, its start-up before it
(numpy's import takes minutes under emulation).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.machine.cgroups.layout import Hierarchy, parse_proc_cgroup, read_layout
from tests.kernel.test_diagnosis_facts import numpy126  # noqa: F401 (a fixture)
from tests.support.agent import AgentProcess, require_root
from tests.support.diagnose import Diagnose
from tests.support.workloads import SOURCES

WORKERS = 4
WINDOW = 10  # seconds: the pool starts inside the window, spins for most of it, then idles, holding its threads
POOL = "thread-pool-oversubscription"


@dataclass(frozen=True)
class Placed:
    """One diagnose run over the pool: the report, the pool's ground truth and where it was placed."""

    report: dict[str, Any]
    truth: dict[str, Any]  # blas_pool.py's line: its pid, numpy's version, each worker's idle threads and BLAS
    threads: dict[int, int]  # pid -> threads, read from /proc after the diagnosis (the pool idles, holding them)
    affinity: int  # CPUs the pool may run on
    hierarchy: Hierarchy
    label: str


@contextlib.contextmanager
def workload_cgroup(hierarchy: Hierarchy) -> Iterator[tuple[Path, str]]:
    """A cgroup of the workload hierarchy only, and its label; its processes killed and it removed after."""
    name = f"schedwatch-placement-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    directory = hierarchy.root / name
    directory.mkdir()
    try:
        yield directory, f"/{name}"
    finally:
        for pid in (directory / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        for _ in range(100):
            try:
                directory.rmdir()
                break
            except OSError:
                subprocess.run(["sleep", "0.05"], check=False)


@pytest.fixture(scope="module")
def placed(agent: AgentProcess, numpy126: Path) -> Iterator[Placed]:  # noqa: F811
    require_root()
    layout = read_layout()
    hierarchy = layout.workload_hierarchy
    assert hierarchy is not None, f"no cgroup hierarchy is mounted here ({layout})"
    with workload_cgroup(hierarchy) as (directory, label):
        enter = f'echo $$ > {directory}/cgroup.procs && exec "$@"'
        busy = str(WINDOW - 4)
        pool = subprocess.Popen(
            ["sh", "-c", enter, "sh", sys.executable, str(SOURCES / "blas_pool.py"), str(WORKERS), busy, "--on-go"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(numpy126)},
        )
        try:
            assert pool.stdin is not None and pool.stdout is not None
            assert "ready" in json.loads(pool.stdout.readline())
            source = f"http://127.0.0.1:{agent.port}"
            diagnose = Diagnose("--duration", str(WINDOW), "--cgroup", label, "--from", source)
            diagnose.wait_for_window()
            pool.stdin.write(b"go\n")
            pool.stdin.flush()
            truth = json.loads(pool.stdout.readline())
            assert truth["numpy"] == "1.26.4"
            check_placed_in_the_workload_hierarchy_only(truth["pid"], hierarchy, label, layout.v1)
            report = diagnose.result()
            pids = [truth["pid"], *(int(pid) for pid in truth["workers"])]
            threads = {pid: len(os.listdir(f"/proc/{pid}/task")) for pid in pids}
            affinity = len(os.sched_getaffinity(truth["pid"]))
        finally:
            assert pool.stdin is not None
            pool.stdin.close()
            pool.wait(timeout=60)
        yield Placed(report, truth, threads, affinity, hierarchy, label)


def check_placed_in_the_workload_hierarchy_only(
    pid: int, hierarchy: Hierarchy, label: str, v1: dict[str, Path]
) -> None:
    paths = parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    assert paths[hierarchy.name] == label, paths
    if "cpu" in v1 and hierarchy.name != "cpu":
        assert paths["cpu"] != label, f"the pool must be in no v1 cpu cgroup of its own: {paths}"
    mirrored = [name for name, path in paths.items() if name != hierarchy.name and path == label]
    assert not mirrored, f"placed in the workload hierarchy ({hierarchy.name or 'cgroup2'}) only, not in {mirrored}"


def view_of(placed: Placed) -> dict[str, Any]:
    found = [view for view in placed.report["workloads"] if view["ref"]["cgroup"] == placed.label]
    assert len(found) == 1, [view["ref"] for view in placed.report["workloads"]]
    return found[0]


def test_threads_processes_pool_and_library_come_from_the_workload_hierarchy(placed: Placed) -> None:
    view = view_of(placed)
    parent = placed.truth["pid"]
    workers = sorted(int(pid) for pid in placed.truth["workers"])
    # Exactly the threads the kernel lists for its processes, idle and holding (12 here: 4 in the parent, 2 in each
    # worker: its own and OpenBLAS's one pool thread on 2 CPUs).
    for pid in workers:
        assert placed.threads[pid] == placed.truth["workers"][str(pid)]["threads"], (pid, placed.threads)
    assert view["threads"] == sum(placed.threads.values()), (view["threads"], placed.threads)
    assert sorted(process["pid"] for process in view["processes"]) == sorted([parent, *workers])
    assert [(pool["parent_pid"], sorted(pool["pids"])) for pool in view["pools"]] == [(parent, workers)]
    openblas = [library for library in view["libraries"] if library["implementation"] == "openblas"]
    assert len(openblas) == 1, view["libraries"]
    assert set(openblas[0]["pids"]) >= set(workers), openblas
    assert view["sched_yield_calls"] is not None and view["sched_yield_calls"] > 0, view["sched_yield_calls"]


def test_the_fix_sizes_each_worker_by_the_workers_it_counted(placed: Placed) -> None:
    cpus = placed.affinity
    assert cpus >= 2, f"needs 2 CPUs or more ({cpus} here): on one, OpenBLAS runs no pool to oversubscribe"
    found = [f for f in placed.report["findings"] if f["cause"] == POOL and f["workload"]["cgroup"] == placed.label]
    assert len(found) == 1, [(f["cause"], f["workload"]) for f in placed.report["findings"]]
    assert "openblas" in " ".join(found[0]["libraries"]), found[0]["libraries"]
    fix = found[0]["fix"]
    threads = max(1, cpus // WORKERS)
    assert fix["threads_per_process"] == threads, fix
    plural = "s" if threads != 1 else ""
    assert any(f"{WORKERS} workers x {threads} thread{plural} fit {cpus} CPUs" in step for step in fix["steps"]), fix
    assert fix["variables"].get("OPENBLAS_NUM_THREADS") == str(threads), fix
