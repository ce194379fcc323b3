"""Sidecar mode: an agent in a pod's shared pid namespace counts that pod's processes only."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.support.agent import AgentProcess
from tests.support.workloads import CgroupSandbox, Workload


def only_child(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def test_sidecar_counts_only_its_pid_namespace(cgroups: CgroupSandbox, yielder: Path, tmp_path: Path) -> None:
    # The agent gets a pid namespace of its own, as a pod with shareProcessNamespace gives its containers.
    agent = AgentProcess(
        tmp_path / "agent.log",
        "--sidecar",
        "--process-top-k",
        "50",
        "--state-dir",
        str(tmp_path),
        prefix=("unshare", "--pid", "--fork", "--mount-proc"),
    )
    inside = outside = None
    try:
        agent.wait_ready()
        agent_pid = only_child(agent.process.pid)
        pod_group, host_group = cgroups.make("pod"), cgroups.make("host")
        inside = subprocess.Popen(
            [
                "nsenter",
                "--target",
                str(agent_pid),
                "--pid",
                "--mount",
                "--",
                str(yielder),
                str(pod_group),
                "3000",
                "2",
                "1",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert inside.stdout is not None
        truth = json.loads(inside.stdout.readline())
        outside = Workload(yielder, host_group, 5000, 1)

        scrape = agent.scrape()
        assert scrape.value("schedwatch_sched_yield_calls_total", cgroup=cgroups.relative(pod_group)) == 6000
        assert scrape.value("schedwatch_sched_yield_calls_total", cgroup=cgroups.relative(host_group)) is None
        # Per-process series carry the pid as the pod sees it.
        assert truth["pid"] < 100, "the workload should have a small pid in the new namespace"
        assert scrape.value("schedwatch_process_sched_yield_calls_total", pid=str(truth["pid"]), comm="yielder") == 6000
    finally:
        if inside is not None and inside.stdin is not None:
            inside.stdin.close()
            inside.wait(10)
        if outside is not None:
            outside.release()
        if agent.process.poll() is None:
            only = only_child(agent.process.pid)
            subprocess.run(["kill", f"-{signal.SIGTERM.value}", str(only)], check=False)
        assert agent.stop() == 0, agent.log()
