"""`schedwatch diagnose --from http://127.0.0.1:17953` inside the shipped image, run with exactly the DaemonSet's
capabilities, mounts and environment (as `kubectl exec ds/schedwatch -- ...` runs it), against a yielder of
known count on the host."""

from __future__ import annotations

import time
from pathlib import Path

from agent.diagnosis.inputs.processes.environment import ALLOWED
from tests.containers.test_image import agent_container  # noqa: F401  (the module's agent, in the image)
from tests.support.agent import AgentProcess
from tests.support.containers import Podman
from tests.support.diagnose import Diagnose
from tests.support.workloads import CgroupSandbox, Workload

YIELDS_PER_THREAD = 100_000
THREADS = 2
WINDOW = 6


def test_diagnose_in_the_image_reads_the_agent_beside_it(
    agent_container: AgentProcess,  # noqa: F811
    podman: Podman,
    cgroups: CgroupSandbox,
    yielder: Path,
) -> None:
    group = cgroups.make("image-diagnose")
    path = cgroups.relative(group)
    diagnose = Diagnose(
        "--from",
        f"http://127.0.0.1:{agent_container.port}",
        "--duration",
        str(WINDOW),
        "--cgroup",
        path,
        command=("podman", "exec", f"{podman.prefix}-agent", "schedwatch"),
    )
    opened = diagnose.wait_for_window()
    workload = Workload(yielder, group, YIELDS_PER_THREAD, THREADS)
    assert time.monotonic() - opened < WINDOW - 1.5
    try:
        report = diagnose.result()
        (view,) = report["workloads"]
        assert view["ref"]["cgroup"] == path
        assert view["sched_yield_calls"] == YIELDS_PER_THREAD * THREADS
        # The host's cgroups come from SCHEDWATCH_CGROUP_ROOT, its processes from the host's pid namespace.
        (process,) = view["processes"]
        assert process["pid"] == workload.pid and process["comm"] == "yielder"
        # Its environ is readable here (root reading root); only allow-listed thread variables ever come out.
        assert process["environment"] is not None
        assert {name for name, _value in process["environment"]} <= set(ALLOWED)
        assert report["node"]["cpus"] is not None
    finally:
        workload.release()
