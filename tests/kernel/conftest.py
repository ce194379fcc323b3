"""Kernel tier: the real agent, real BPF programs, real cgroups. Needs root; fails loudly without it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from agent.machine import kernel
from agent.machine.facts import gather
from tests.support.agent import AgentProcess, require_root

GRACE_SECONDS = 3.0  # shared fixtures (cgroups, workloads) are in tests/conftest.py


@pytest.fixture(scope="module")
def headers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Kernel headers where bcc finds them (BCC_KERNEL_SOURCE for one test module, as the agent sets it)."""
    require_root()
    facts = gather()
    assert facts.headers is not None, facts.headers_error
    with pytest.MonkeyPatch.context() as patch:
        if "BCC_KERNEL_SOURCE" not in os.environ:
            patch.setenv("BCC_KERNEL_SOURCE", "")
            patch.delenv("BCC_KERNEL_SOURCE")
        kernel.prepare_headers(facts.headers, tmp_path_factory.mktemp("state"))
        yield


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
        "--collector.syscall_families",  # off by default: the kernel tests check it too
        "--state-dir",
        str(tmp_path_factory.mktemp("state")),
    )
    process.wait_ready()
    yield process
    code = process.stop()
    assert code == 0, f"agent exited with {code} on SIGTERM:\n{process.log()}"
