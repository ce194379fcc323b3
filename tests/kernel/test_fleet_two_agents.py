"""Two agents (two instance labels) under one real Prometheus: the ranking spans both, and `--node` drills into
each. Both agents see the whole machine (there is no flag scoping an agent to a cgroup subtree yet), so the one
workload is ranked under each instance, with the same counts (issue 27)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.diagnose import Diagnose
from tests.support.prometheus import Prometheus
from tests.support.workloads import CgroupSandbox, Workload

YIELDS = 200_000
THREADS = 2


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    process = AgentProcess(
        tmp_path_factory.mktemp("second") / "agent.log", "--state-dir", str(tmp_path_factory.mktemp("state2"))
    )
    process.wait_ready()
    yield process
    assert process.stop() == 0, process.log()


def test_the_ranking_spans_two_agents_and_node_drills_into_each(
    agent: AgentProcess, second: AgentProcess, cgroups: CgroupSandbox, yielder: Path, tmp_path: Path
) -> None:
    instances = [f"127.0.0.1:{agent.port}", f"127.0.0.1:{second.port}"]
    prometheus = Prometheus(tmp_path, instances)
    group = cgroups.make("two-agents")
    path = cgroups.relative(group)
    first = Workload(yielder, group, 1, 1)  # the series exists before the storm
    try:
        series = f'schedwatch_sched_yield_calls_total{{cgroup="{path}"}}'
        deadline = time.monotonic() + 60
        while len(prometheus.query(f"count_over_time({series}[1m]) >= 3")) < 2:
            assert time.monotonic() < deadline, prometheus.query(series)
            time.sleep(0.5)
        storm = Workload(yielder, group, YIELDS, THREADS)
        total = YIELDS * THREADS + 1
        try:
            deadline = time.monotonic() + 60
            while len(prometheus.query(f"{series} == {total}")) < 2:
                assert time.monotonic() < deadline, prometheus.query(series)
                time.sleep(0.5)
            url = f"prometheus+{prometheus.url}"
            ranking = Diagnose("--from", url, "--duration", "120").result()
            assert sorted(ranking["nodes"]) == sorted(instances)
            rows = [row for row in ranking["workloads"] if row["workload"]["cgroup"] == path]
            assert sorted(row["instance"] for row in rows) == sorted(instances)
            for instance in instances:
                report = Diagnose("--from", url, "--node", instance, "--duration", "120", "--cgroup", path).result()
                (view,) = [w for w in report["workloads"] if w["ref"]["cgroup"] == path]
                # Exactly the storm's yields, and the first workload's 1 when its first sample is inside the range
                # (Prometheus' increase() would have extrapolated them: 502,001 once).
                assert view["sched_yield_calls"] in (YIELDS * THREADS, total), (instance, view)
                assert report["node"]["cpus"] is not None
        finally:
            storm.release()
    finally:
        first.release()
        prometheus.stop()
