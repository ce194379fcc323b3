"""perf mode (no BPF) on real Podman containers: exact yields and futex calls by op under the container's names."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.containers.conftest import GRACE_SECONDS
from tests.containers.test_identity import RUNC_INIT_YIELDS, eventually, yielded
from tests.support.agent import AgentProcess
from tests.support.containers import Podman

FUTEX_OPS = ("wait", "wake", "requeue", "lock_pi", "waitv", "other")


@pytest.fixture(scope="module")
def perf_agent(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    agent = AgentProcess(
        tmp_path_factory.mktemp("perf-agent") / "agent.log",
        "--mode",
        "perf",
        "--series-grace",
        str(GRACE_SECONDS),
        "--runtime.docker-sockets",
        str(podman.socket),
        "--runtime.cri-sockets",
        "",
        "--state-dir",
        str(tmp_path_factory.mktemp("state")),
    )
    agent.wait_ready()
    yield agent
    assert agent.stop() == 0, agent.log()


def test_perf_mode_counts_a_podman_containers_yields_and_futex_calls(perf_agent: AgentProcess, podman: Podman) -> None:
    # Started after the agent, with no scrape between: the container's cgroup gets its counters as it is made.
    # -i keeps stdin open: the futexer holds after its report, which is the last line the container prints.
    script = "/w/yielder - 30000 2 0 && exec /w/futexer - 6 2000000 4 1"
    # Podman's default seccomp profile refuses the futex2 syscalls before their tracepoints fire (in every mode).
    container = podman.run("perf", "sh", "-c", script, options=("-i", "--security-opt", "seccomp=unconfined"))
    name = str(podman.inspect(container)["Name"])
    truth = futexer_report(container)
    scrape = eventually(perf_agent, lambda s: yielded(s, 60_000, container_id=container, container=name))
    assert scrape.find("schedwatch_mode") == {frozenset({("mode", "perf")}): 1.0}
    for op in FUTEX_OPS:
        exported = scrape.value("schedwatch_futex_calls_total", container_id=container, container=name, op=op)
        assert exported is not None, f"no futex series for op {op}"
        if op in ("wait", "wake"):
            # the yielder's threads join with a few futex waits of their own, and runc's init (the Go runtime:
            # futex wait and wake only) adds some: 9 to 20 more of each in 3 runs here
            assert truth[op] <= exported <= truth[op] + RUNC_INIT_YIELDS, (op, exported, truth)
        else:
            assert exported == truth[op], (op, exported, truth)


def futexer_report(container: str, timeout: float = 30.0) -> dict[str, int]:
    """The futexer's ground truth, the second JSON line the container prints, once it has."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = subprocess.run(["podman", "logs", container], capture_output=True, text=True, check=True).stdout
        lines = [line for line in logs.splitlines() if line.startswith("{")]
        if len(lines) == 2:
            report: dict[str, int] = json.loads(lines[1])
            return report
        time.sleep(0.1)
    raise AssertionError(f"the futexer did not report within {timeout}s: {logs!r}")
