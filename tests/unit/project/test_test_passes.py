"""The Makefile's two test passes and tests/support/parallel.py name the same tiers, and every tier is in one."""

from __future__ import annotations

import re

from tests.support import parallel
from tests.support.agent import REPO


def makefile_tiers(variable: str) -> tuple[str, ...]:
    """The directories the Makefile's *variable* lists, each with its trailing slash."""
    match = re.search(rf"^{variable}\s*:=(.*)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match is not None, f"no {variable} in the Makefile"
    return tuple(f"{tier}/" for tier in match.group(1).split())


def test_the_makefile_runs_the_tiers_parallel_py_orders() -> None:
    assert makefile_tiers("PARALLEL_TIERS") == parallel.PARALLEL
    assert makefile_tiers("SERIAL_TIERS") == parallel.SERIAL


def test_every_tier_with_tests_runs_in_one_pass() -> None:
    tiers = {f"tests/{path.parent.name}/" for path in (REPO / "tests").glob("*/test_*.py")}
    assert tiers == set(parallel.PARALLEL) | set(parallel.SERIAL)
    assert not set(parallel.PARALLEL) & set(parallel.SERIAL)
