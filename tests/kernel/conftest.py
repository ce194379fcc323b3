"""Kernel tier: the real agent, real BPF programs, real cgroups. Needs root; fails loudly without it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.agent import AgentProcess, require_root

GRACE_SECONDS = 3.0  # shared fixtures (cgroups, workloads) are in tests/conftest.py


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
