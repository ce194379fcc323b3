"""The short scenario suite (the full one is `sudo make scenarios`, docs/diagnosis-scenarios.md): the most telling
scenarios run live, `schedwatch diagnose --json` on each, the findings for that workload against what it should
show."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.catalog import BY_NAME
from tests.scenarios.suite import run_plain
from tests.support.workloads import CgroupSandbox

WINDOW_SECONDS = 8.0


@pytest.mark.parametrize("name", ["numpy126-pool", "healthy-numpy126-pool"])
def test_scenario_gets_exactly_its_expected_finding(name: str, cgroups: CgroupSandbox, tmp_path: Path) -> None:
    """numpy 1.26 Pool, threads unset: thread-pool-oversubscription/yield-storm and nothing else; the same Pool with
    1 BLAS thread per worker: no finding at all."""
    outcome = run_plain(BY_NAME[name], 1, cgroups, tmp_path, WINDOW_SECONDS)
    assert outcome.error is None, outcome.error
    assert outcome.correct, f"expected {outcome.expected}, found {[str(f) for f in outcome.found] or 'nothing'}"
