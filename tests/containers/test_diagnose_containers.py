"""`schedwatch diagnose --from` an agent that names Podman containers: a container asked for by name is found, its
yields over the window counted, and its processes listed from the container's own cgroup."""

from __future__ import annotations

import subprocess
import time

from tests.containers.test_identity import RUNC_INIT_YIELDS
from tests.support.agent import AgentProcess
from tests.support.containers import Podman
from tests.support.diagnose import Diagnose

YIELDS = 30_000 * 2
WINDOW = 10  # the container starts within it (Podman takes a second or more), and yields in well under one


def test_a_named_container_is_diagnosed_with_its_processes(container_agent: AgentProcess, podman: Podman) -> None:
    name = f"{podman.prefix}-diagnosed"
    # The name filter needs the agent to have its name by the second reading: Podman answers in milliseconds,
    # once a scrape has asked.
    source = f"http://127.0.0.1:{container_agent.port}"
    diagnose = Diagnose("--duration", str(WINDOW), "--from", source, "--container", name)
    opened = diagnose.wait_for_window()
    container = podman.run("diagnosed", "sh", "-c", "/w/yielder - 30000 2 0 && exec sleep 600")
    deadline = opened + WINDOW - 2
    while '"yields"' not in subprocess.run(["podman", "logs", container], capture_output=True, text=True).stdout:
        assert time.monotonic() < deadline, "the container did not yield early enough in the window"
        time.sleep(0.2)
    # diagnose reads the agent only at the window's start and end; a scrape in between (Prometheus's, on a node)
    # is what asks the runtime for the new container's name.
    container_agent.scrape()
    try:
        report = diagnose.result()
        (view,) = report["workloads"]
        assert view["ref"]["container_id"] == container and view["ref"]["container"] == name
        # the container was made inside the window: everything it did counts, runc's init included
        assert YIELDS <= view["sched_yield_calls"] <= YIELDS + RUNC_INIT_YIELDS
        # read closely (a filter names it): its processes, from the cgroups of its id
        assert [process["comm"] for process in view["processes"]] == ["sleep"]
    finally:
        podman.remove(container)
