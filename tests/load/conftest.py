"""Load tier, short versions for `make test` (the long ones run as `make load` and `make soak`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import require_root
from tests.support.workloads import CgroupSandbox, build


@pytest.fixture(scope="module")
def cgroups() -> Iterator[CgroupSandbox]:
    require_root()
    made = CgroupSandbox()
    yield made
    made.cleanup()


@pytest.fixture(scope="session")
def yielder() -> Path:
    return build("yielder")


@pytest.fixture(scope="session")
def forker() -> Path:
    return build("forker")
