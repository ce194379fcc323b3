"""Fixtures every tier shares: a cgroup sandbox and the C workloads of exactly known behaviour; the order in which
`make test`'s two passes run the tiers (tests/support/parallel.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import parallel
from tests.support.agent import require_root
from tests.support.workloads import CgroupSandbox, build


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    parallel.order(items)


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
