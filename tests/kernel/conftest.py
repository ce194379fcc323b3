"""Kernel tier: the real agent, real BPF programs, real cgroups. Needs root; fails loudly without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess, require_root
from tests.support.workloads import CgroupSandbox, build

GRACE_SECONDS = 3.0


@pytest.fixture(scope="session")
def cgroups() -> Iterator[CgroupSandbox]:
    require_root()
    made = CgroupSandbox()
    yield made
    made.cleanup()


@pytest.fixture(scope="session")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """One agent for the kernel tests: every per-process series exported, short expiry."""
    require_root()
    log = tmp_path_factory.mktemp("agent") / "agent.log"
    process = AgentProcess(
        log,
        "--process-top-k",
        "1000",
        "--series-grace",
        str(GRACE_SECONDS),
        "--bpf-stats",
        "--state-dir",
        str(tmp_path_factory.mktemp("state")),
    )
    process.wait_ready()
    yield process
    code = process.stop()
    assert code == 0, f"agent exited with {code} on SIGTERM:\n{process.log()}"


@pytest.fixture(scope="session")
def yielder() -> Path:
    return build("yielder")


@pytest.fixture(scope="session")
def futexer() -> Path:
    return build("futexer")


@pytest.fixture(scope="session")
def spinner() -> Path:
    return build("spinner")


@pytest.fixture(scope="session")
def sleeper() -> Path:
    return build("sleeper")
