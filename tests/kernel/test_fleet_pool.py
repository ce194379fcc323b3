"""The fleet diagnosis of a numpy 1.26 multiprocessing.Pool of 4 workers through a real Prometheus gives the fix the
node-side `diagnose` gives: the agent exports the workers of the flagged workload (schedwatch_pool_workers) and the
node's CPUs (schedwatch_node_cpus), so the fix no longer assumes 1 worker; and the ranking's rates over one minute,
from the raw series and from the recorded ones, match the node's `diagnose` over the same minute (issue 27)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent.commands.diagnose import fleet_ranking
from agent.diagnosis.inputs.live.fleet import PrometheusSource
from agent.identity.filter import Filter
from tests.scenarios.catalog import numpy_target
from tests.support.agent import REPO, AgentProcess
from tests.support.diagnose import Diagnose
from tests.support.prometheus import Prometheus
from tests.support.workloads import CgroupSandbox

NUMPY_POOL = REPO / "tests" / "workloads" / "numpy_pool.py"
WORKERS = 4
POOL = "thread-pool-oversubscription"


@pytest.fixture(scope="module")
def prometheus(agent: AgentProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{agent.port}"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def recording(agent: AgentProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """A second Prometheus scraping the same agent with the fleet recording rules loaded."""
    rules = [REPO / "deploy" / "prometheus" / "fleet_rules.yaml"]
    server = Prometheus(tmp_path_factory.mktemp("recording"), [f"127.0.0.1:{agent.port}"], rule_files=rules)
    yield server
    server.stop()


def ranking_row(server: Prometheus, cgroup: str, at: str, recorded: bool) -> dict[str, Any]:
    """The pool's row of the ranking over the 60 s before *at* (a Unix time)."""
    source = PrometheusSource(f"prometheus+{server.url}")
    windows = source.node_windows(60, at=float(at))
    rows = [
        row
        for row in fleet_ranking(windows, Filter(cgroup=cgroup), 60)["workloads"]
        if row["workload"]["cgroup"] == cgroup
    ]
    assert len(rows) == 1, rows
    assert source.recorded == recorded
    row: dict[str, Any] = rows[0]
    return row


def pool_fix(report: dict[str, Any], cgroup: str) -> dict[str, Any]:
    found = [f for f in report["findings"] if f["cause"] == POOL and f["workload"]["cgroup"] == cgroup]
    assert len(found) == 1, [(f["cause"], f["workload"]) for f in report["findings"]]
    fix: dict[str, Any] = found[0]["fix"]
    return fix


def test_a_4_worker_numpy_pool_gets_the_nodes_thread_count_through_prometheus(
    agent: AgentProcess, prometheus: Prometheus, recording: Prometheus, cgroups: CgroupSandbox
) -> None:
    numpy_126 = {**os.environ, "PYTHONPATH": str(numpy_target("1.26"))}  # pip-installed into tests/.build once
    group = cgroups.make("fleet-pool")
    path = cgroups.relative(group)
    version = subprocess.run(
        [sys.executable, "-c", "import numpy; print(numpy.__version__)"], capture_output=True, text=True, env=numpy_126
    )
    assert version.stdout.startswith("1.26"), version
    # Busy for 170 s (no hold): the whole process group is killed when the test is done with it.
    pool = subprocess.Popen(
        [sys.executable, NUMPY_POOL, group, str(WORKERS), "unset", "170s", "0"],
        env=numpy_126,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    started = time.monotonic()
    try:
        deadline = time.monotonic() + 120  # standing evaluations every 10 s, scrapes every 1 s
        while not prometheus.query(f'schedwatch_pool_workers{{cgroup="{path}"}} == {WORKERS}'):
            assert time.monotonic() < deadline, prometheus.query(f'schedwatch_pool_workers{{cgroup="{path}"}}')
            time.sleep(1)
        assert [float(i["value"][1]) for i in prometheus.query("schedwatch_node_cpus")] == [float(os.cpu_count() or 0)]

        node = Diagnose("--from", f"http://127.0.0.1:{agent.port}", "--duration", "10", "--cgroup", path).result()
        fleet = Diagnose(
            "--from", f"prometheus+{prometheus.url}", "--node", "127.0.0.1", "--duration", "60", "--cgroup", path
        ).result()
        cpus = os.cpu_count()
        assert fleet["node"]["cpus"] == cpus
        node_fix, fleet_fix = pool_fix(node, path), pool_fix(fleet, path)
        assert node_fix["threads_per_process"] is not None
        assert fleet_fix["threads_per_process"] == node_fix["threads_per_process"], (node_fix, fleet_fix)
        threads = fleet_fix["threads_per_process"]
        assert threads == max(1, (cpus or 1) // WORKERS)
        plural = "s" if threads != 1 else ""
        assert any(f"{WORKERS} workers x {threads} thread{plural} fit {cpus} CPUs" in s for s in fleet_fix["steps"])

        # Over one minute, the node's diagnose (reading the agent at its start and end) and the ranking from the
        # raw and from the recorded series agree. rate1m divides by 60 s whatever its samples cover: a workload's
        # first minute of recorded rates is diluted, so the minute opens 70 s after the pool started (and the pool
        # is still busy at its end).
        while time.monotonic() < started + 70:
            time.sleep(1)
        minute = Diagnose(
            "--from", f"http://127.0.0.1:{agent.port}", "--duration", "60", "--cgroup", path
        ).result()  # fmt: skip
        at = f"{time.time():.3f}"  # the diagnose read the agent a moment ago: its minute ends here, within ~1 s
        (view,) = [w for w in minute["workloads"] if w["ref"]["cgroup"] == path]
        seconds = view["seconds"]
        node_rates = {
            "cpu_used_cores": view["cpu_used_cores"],
            "runqueue_wait_per_second": view["runqueue_wait_seconds"] / seconds,
            "sched_yield_per_second": view["sched_yield_calls"] / seconds,
        }
        raw = ranking_row(prometheus, path, at, recorded=False)
        recorded = ranking_row(recording, path, at, recorded=True)
        print(
            "node", node_rates, "raw", {f: raw[f] for f in node_rates}, "recorded", {f: recorded[f] for f in node_rates}
        )
        for field, expected in node_rates.items():
            assert expected > 0, node_rates
            for ranked in (raw, recorded):
                assert abs(ranked[field] - expected) <= 0.10 * expected, (field, node_rates, raw, recorded)
    finally:
        os.killpg(pool.pid, signal.SIGKILL)
        pool.wait(timeout=30)
        cgroups.remove(group, timeout=30)
