"""Container tier: real Podman and containerd, the real agent. Needs root; fails loudly without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess, require_root
from tests.support.containers import Containerd, Docker, Podman, build_pause_image, export_image
from tests.support.cri import CriDriver
from tests.support.workloads import build

GRACE_SECONDS = 3.0


@pytest.fixture(scope="session")
def workload_binaries() -> None:
    for name in ("yielder", "sleeper", "futexer", "spinner"):
        build(name)


@pytest.fixture(scope="session")
def podman(workload_binaries: None) -> Iterator[Podman]:
    require_root()
    runtime = Podman()
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def containerd(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Containerd]:
    runtime = Containerd(
        export_image(Path("/var/tmp/schedwatch-test-debian.tar")),
        build_pause_image(Path("/var/tmp/schedwatch-test-pause.tar")),
    )
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def docker(podman: Podman) -> Iterator[Docker]:
    runtime = Docker(export_image(Path("/var/tmp/schedwatch-test-debian.tar")))
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def cri(containerd: Containerd) -> Iterator[CriDriver]:
    """The kubelet's side of the CRI, on the test run's containerd."""
    driver = CriDriver(containerd.socket)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def container_agent(
    podman: Podman, containerd: Containerd, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentProcess]:
    """The agent asking the test run's Podman and containerd for names, with a short expiry."""
    agent = AgentProcess(
        tmp_path_factory.mktemp("agent") / "agent.log",
        "--series-grace",
        str(GRACE_SECONDS),
        "--process-top-k",
        "1000",
        "--runtime.docker-sockets",
        str(podman.socket),
        "--runtime.cri-sockets",
        str(containerd.socket),
        "--runtime.containerd-socket",
        str(containerd.socket),
        "--state-dir",
        str(tmp_path_factory.mktemp("state")),
    )
    agent.wait_ready()
    yield agent
    assert agent.stop() == 0, agent.log()
