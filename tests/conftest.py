"""Fixtures every tier shares: a cgroup sandbox and the C workloads of exactly known behaviour; how a parallel run
(`make test`, pytest-xdist) groups and orders the tests (tests/support/parallel.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import parallel
from tests.support.agent import require_root
from tests.support.workloads import CgroupSandbox, build


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    parallel.order(items)
    parallel.mark_groups(items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return parallel.scheduler(config, log)


@pytest.fixture(scope="session")
def cgroups() -> Iterator[CgroupSandbox]:
    """cgroups made for this test run (needs root: fails loudly without it), removed at the end."""
    require_root()
    made = CgroupSandbox()
    yield made
    made.cleanup()


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


@pytest.fixture(scope="session")
def forker() -> Path:
    return build("forker")
