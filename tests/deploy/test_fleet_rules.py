"""deploy/prometheus/fleet_rules.yaml: the fleet view's recording rules are valid, promtool-tested, and record
exactly the series the fleet ranking reads when they are present (agent/diagnosis/inputs/live/fleet.py)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from agent.diagnosis.inputs.live.fleet import COUNTED, recorded_name
from agent.metrics import WORKLOAD_LABELS
from agent.series.schema import parts_of, sample_name
from tests.deploy.test_deploy import PROMETHEUS

RULES = PROMETHEUS / "fleet_rules.yaml"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: apt-get install prometheus")
    return found


def test_promtool_checks_the_fleet_rules() -> None:
    result = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(COUNTED)} rules found" in result.stdout


def test_promtool_unit_tests_of_the_fleet_rules_pass() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", "fleet_rules_test.yaml"], cwd=PROMETHEUS, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_counter_the_ranking_reads_is_recorded_by_instance_and_workload() -> None:
    rules = {
        rule["record"]: rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    }
    expected = {}
    for spec in COUNTED:
        by = ", ".join(("instance", *WORKLOAD_LABELS, *parts_of(spec)))
        expected[recorded_name(sample_name(spec))] = f"sum by ({by}) (rate({sample_name(spec)}[1m]))"
    assert rules == expected
