"""The short scenario suite (the full one is `sudo make scenarios`, docs/diagnosis-scenarios.md): the scenarios
tagged "short" run live, one sick and one healthy per cause, `schedwatch diagnose --json` on each, the findings for
that workload against what it should show."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.catalog import BY_NAME, SCENARIOS
from tests.scenarios.suite import run_plain
from tests.support.workloads import CgroupSandbox

WINDOW_SECONDS = 8.0  # the thread pools' window, as before
SHORT_WINDOW_SECONDS = 5.0  # the other causes' rates are steady from the start: a shorter window keeps this tier short
SHORT = [scenario.name for scenario in SCENARIOS if "short" in scenario.tags]


@pytest.mark.parametrize("name", SHORT)
def test_scenario_gets_exactly_its_expected_finding(name: str, cgroups: CgroupSandbox, tmp_path: Path) -> None:
    """e.g. numpy 1.26 Pool, threads unset: thread-pool-oversubscription/yield-storm and nothing else; the same Pool
    with 1 BLAS thread per worker: no finding at all. A steal finding where the node lost that much to the
    hypervisor in the window is true there, and allowed (suite.Outcome)."""
    scenario = BY_NAME[name]
    seconds = WINDOW_SECONDS if "numpy" in name else SHORT_WINDOW_SECONDS
    outcome = run_plain(scenario, 1, cgroups, tmp_path, seconds)
    assert outcome.error is None, outcome.error
    assert outcome.correct, f"expected {outcome.expected}, found {[str(f) for f in outcome.found] or 'nothing'}"
