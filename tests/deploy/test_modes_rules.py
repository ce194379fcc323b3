"""Alert rules and dashboard queries in perf and procfs modes (docs/modes.md): promtool tests per mode, and every
workload alert has something to fire on whichever mode the agent runs in."""

from __future__ import annotations

import json
import re
import subprocess

import yaml

from tests.deploy.test_deploy import PROMETHEUS, REPO, tool

DASHBOARD = REPO / "deploy" / "grafana" / "schedwatch.json"
MODE_TESTS = "alerts_modes_test.yaml"
# Series each mode exports that BPF mode's alerts read (agent/collectors/modes.py says what each mode lacks).
NOT_IN = {
    "perf": {"schedwatch_runqueue_latency_seconds", "schedwatch_futex_wait", "schedwatch_offcpu_seconds"},
    "procfs": {
        "schedwatch_runqueue_latency_seconds",
        "schedwatch_futex_wait",
        "schedwatch_offcpu_seconds",
        "schedwatch_sched_yield_calls",
        "schedwatch_futex_calls",
    },
}
# Alerts with no counterpart without per-event BPF data: a p99 needs a histogram, BPF overhead needs BPF,
# dropped events are BPF map drops, futex and yield storms need syscall counts (perf mode has them).
NEEDS_BPF = {"SchedwatchRunQueueLatencyHigh", "SchedwatchBPFOverhead", "SchedwatchEventsDropped"}


def rules() -> list[dict[str, str]]:
    groups = yaml.safe_load((PROMETHEUS / "alerts.yaml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_unit_tests_per_mode_pass() -> None:
    result = subprocess.run(
        [tool("promtool"), "test", "rules", MODE_TESTS], cwd=PROMETHEUS, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tests = [
        t for group in yaml.safe_load((PROMETHEUS / MODE_TESTS).read_text())["tests"] for t in group["alert_rule_test"]
    ]
    fired = {t["alertname"] for t in tests if t["exp_alerts"]}
    assert "SchedwatchCPUOversubscribed" in fired


def test_every_workload_alert_can_fire_in_every_mode() -> None:
    for mode, missing in NOT_IN.items():
        for name in {rule["alert"] for rule in rules()} - NEEDS_BPF:
            if mode == "procfs" and name in {"SchedwatchYieldStorm", "SchedwatchFutexStorm"}:
                continue  # procfs mode cannot count system calls: `schedwatch check` says so
            usable = [r for r in rules() if r["alert"] == name and not any(m in r["expr"] for m in missing)]
            assert usable, f"{name} has no rule reading series that {mode} mode exports"


def test_dashboard_shows_oversubscription_in_every_mode() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    waiting = [e for e in exprs if "schedwatch_runqueue_latency_seconds_sum" in e]
    assert waiting and all("schedwatch_runqueue_wait_seconds_total" in e for e in waiting), waiting
    assert all(re.search(r"\bor\b", e) for e in waiting)
