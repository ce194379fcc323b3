"""The local stack (scripts/stack.sh): agent, Prometheus with the rules, Alertmanager; all stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml

from tests.support.agent import REPO, require_root

PROMETHEUS = REPO / "deploy" / "prometheus"


def rules_in_the_stacks_files() -> int:
    """How many rules the rule files that the stack's prometheus.yml loads hold (alerts and recording rules)."""
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    total = 0
    for name in config["rule_files"]:
        groups = yaml.safe_load((PROMETHEUS / name).read_text())["groups"]
        total += sum(len(group["rules"]) for group in groups)
    return total


def get(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=5) as response:
        document: dict[str, object] = json.loads(response.read())
        return document


def test_stack_scrapes_the_agent_and_loads_the_rules(tmp_path: Path) -> None:
    require_root()
    stack = subprocess.Popen(
        [str(REPO / "scripts" / "stack.sh")],
        env={**os.environ, "STACK_DIR": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                targets = get("http://127.0.0.1:9090/api/v1/targets")["data"]["activeTargets"]  # type: ignore[index]
                if targets and targets[0]["health"] == "up":
                    break
            except OSError:
                pass
            assert stack.poll() is None, stack.stderr.read().decode() if stack.stderr else ""
            assert time.monotonic() < deadline, "Prometheus never scraped the agent"
            time.sleep(1)
        groups = get("http://127.0.0.1:9090/api/v1/rules")["data"]["groups"]  # type: ignore[index]
        expected = rules_in_the_stacks_files()
        assert expected > 0
        assert sum(len(g["rules"]) for g in groups) == expected
        alertmanagers = get("http://127.0.0.1:9090/api/v1/alertmanagers")["data"]["activeAlertmanagers"]  # type: ignore[index]
        assert alertmanagers and "127.0.0.1:9093" in alertmanagers[0]["url"]
        assert get("http://127.0.0.1:9093/api/v2/status")["cluster"]  # Alertmanager answers
    finally:
        os.killpg(stack.pid, signal.SIGTERM)
        try:
            stack.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(stack.pid, signal.SIGKILL)  # leave nothing behind for the tests that follow
            raise AssertionError("the stack did not stop within 60 s of SIGTERM") from None
    for port in (17953, 9090, 9093):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
        except OSError:
            continue
        raise AssertionError(f"something still listens on {port} after the stack stopped")
