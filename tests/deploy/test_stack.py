"""The local stack (scripts/stack.sh): agent, Prometheus with the rules, Alertmanager; all stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.support.agent import REPO, require_root


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
        assert sum(len(g["rules"]) for g in groups) == 9
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
