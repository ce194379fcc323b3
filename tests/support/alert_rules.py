"""The shipped alert rules on a shorter clock, for tests that watch them fire in a real Prometheus.

Prometheus' rate() divides by its whole range, however little of it a new series covers: a storm twice the
threshold crosses it only once half of `[2m]` has passed. Tests render the shipped rules with every range window
(and, where asked, every `for`) divided by a factor: the same expressions, thresholds, labels and texts on a
shorter clock. The shipped windows and `for`s themselves are checked by `promtool test rules`
(deploy/prometheus/alerts_test.yaml, tests/deploy/test_deploy.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.support.agent import REPO

SHIPPED = REPO / "deploy" / "prometheus" / "alerts.yaml"


def _seconds(minutes: str, factor: int) -> str:
    return f"{int(minutes) * 60 // factor}s"


def compressed(target: Path, windows: int, holds: int = 1) -> Path:
    """The shipped rules written to *target* with every `[Nm]` range divided by *windows* and every `for: Nm` by
    *holds* (1: as shipped)."""
    document = yaml.safe_load(SHIPPED.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"\[(\d+)m", lambda match: "[" + _seconds(match.group(1), windows), rule["expr"])
            if holds != 1:
                rule["for"] = _seconds(rule["for"].rstrip("m"), holds)
    target.write_text(yaml.safe_dump(document))
    return target


def decided_after(rules: Path, alertname: str) -> int:
    """Seconds of a workload's life after which *alertname* (in rules written by :func:`compressed` with both factors)
    has had its whole chance to fire: its longest range window filled and its `for` passed, and a few evaluations."""
    for group in yaml.safe_load(rules.read_text())["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alertname:
                windows = [int(seconds) for seconds in re.findall(r"\[(\d+)s\]", rule["expr"])]
                return max(windows, default=0) + int(rule["for"].rstrip("s")) + 5
    raise AssertionError(f"{alertname} is not in {rules}")
