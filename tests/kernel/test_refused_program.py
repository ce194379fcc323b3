"""--mode auto never hides a broken program: the real loader and the real verifier, on a kernel where BPF works,
refusing one program (sched.bpf.c, made by a test-only define to read address 8 where it reads the clock: what
Debian 6.1's verifier did to it once, for another reason).

The agent logs the verifier's words, counts that collector in its perf form (task schedstat) while the others stay
BPF, exports schedwatch_source_degraded for it (the SchedwatchDegraded alert fires on that: promtool-tested in
deploy/prometheus/alerts_test.yaml, and here by a real Prometheus scraping the agent), and `check` says so;
`check --mode bpf` exits 1 with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kernel.conftest import GRACE_SECONDS
from tests.kernel.test_modes import schedstat
from tests.support import alert_rules
from tests.support.agent import REPO, AgentProcess, require_root
from tests.support.prometheus import Prometheus
from tests.support.schemas import assert_valid
from tests.support.scrape import cgroup_value
from tests.support.workloads import CgroupSandbox, Workload

REFUSE_SCHED = {"sched.bpf.c": {"bpf_ktime_get_ns()": "(*(volatile u64 *)8)"}}
REFUSED = (
    "cannot load sched.bpf.c: the kernel's verifier refused tracepoint__sched__sched_switch: "
    "R1 invalid mem access 'scalar' (at instruction 2: r1 = *(u64 *)(r1 +0))"
)


def refusing_environment() -> dict[str, str]:
    return {**os.environ, "SCHEDWATCH_TEST_BPF_DEFINES": json.dumps(REFUSE_SCHED)}


@pytest.fixture(scope="module")
def refused_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    require_root()
    work = tmp_path_factory.mktemp("refused")
    agent = AgentProcess(
        work / "agent.log",
        "--series-grace",
        str(GRACE_SECONDS),
        "--state-dir",
        str(work / "state"),
        env=refusing_environment(),
    )
    agent.wait_ready(timeout=180)  # it compiles each program, the refused one too, before it serves
    yield agent
    assert agent.stop() == 0, agent.log()


def logged(agent: AgentProcess, event: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in agent.log().splitlines() if line.startswith("{")]
    return [line for line in lines if line["event"] == event]


def test_the_refused_collector_counts_without_bpf_and_the_others_with_it(
    refused_agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path, spinner: Path
) -> None:
    group = cgroups.make("refused-sched")
    path = cgroups.relative(group)
    refused_agent.scrape()  # the cgroup is seen: its threads are counted from their start
    Workload(yielder, group, 4_321, 2, hold=False)
    workload = Workload(spinner, group, 3, 1.5, 1)  # three CPU-bound threads sharing CPU 1, then parked
    try:
        scrape = refused_agent.scrape()
        on_cpu, waited = schedstat(workload.pid)
        assert scrape.find("schedwatch_mode") == {frozenset({("mode", "bpf")}): 1.0}
        degraded = {"source": "sched", "runs_as": "perf", "cause": "load_failed"}
        assert scrape.value("schedwatch_source_degraded", **degraded) == 1
        assert len(scrape.find("schedwatch_source_degraded")) == 1, "only sched is degraded"
        assert scrape.value("schedwatch_source_up", source="sched") == 1
        assert scrape.value("schedwatch_source_up", source="syscalls") == 1
        # syscalls stays BPF: exact yields, and futex wait time (which perf counters cannot time)
        assert cgroup_value(scrape, "schedwatch_sched_yield_calls_total", path) == 8_642
        assert scrape.find("schedwatch_futex_wait_seconds_total") != {}
        # sched counts from schedstat, as the kernel does: the spinners are parked, their numbers stand still
        assert waited > 1.5, "three spinners on one CPU for 1.5 s wait about 3 s in all"
        assert cgroup_value(scrape, "schedwatch_runqueue_wait_seconds_total", path) == pytest.approx(waited, rel=1e-3)
        assert cgroup_value(scrape, "schedwatch_oncpu_seconds_total", path) == pytest.approx(on_cpu, rel=1e-3)
        # ... and fakes nothing only BPF's sched program gives
        assert scrape.find("schedwatch_runqueue_latency_seconds_count") == {}
        assert scrape.find("schedwatch_offcpu_seconds_total") == {}
    finally:
        workload.release()


def test_the_log_carries_the_verifiers_words(refused_agent: AgentProcess) -> None:
    (failed,) = [line for line in logged(refused_agent, "collector_failed_to_start") if line["collector"] == "sched"]
    assert failed["error"] == REFUSED
    assert "R1 invalid mem access 'scalar'" in failed["verifier"]
    assert failed["verifier"].splitlines()[-1].startswith("processed ")
    (degraded,) = logged(refused_agent, "collector_degraded")
    said = {key: degraded[key] for key in ("collector", "runs_as", "cause", "reason", "level")}
    assert said == {
        "collector": "sched",
        "runs_as": "perf",
        "cause": "load_failed",
        "reason": REFUSED,
        "level": "warning",
    }
    (mode,) = logged(refused_agent, "mode")
    assert (mode["mode"], mode["degraded"], mode["level"]) == ("bpf", ["sched"], "warning")
    assert mode["reason"] == "the BPF programs can be loaded here, except for sched (degraded)"


def test_the_exposition_with_a_degraded_collector_passes_promtool(refused_agent: AgentProcess) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus"
    result = subprocess.run(
        [promtool, "check", "metrics"], input=refused_agent.scrape().text, capture_output=True, text=True
    )
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), result.stdout + result.stderr


def test_a_real_prometheus_fires_the_degraded_alert_for_the_refused_collector(
    refused_agent: AgentProcess, tmp_path: Path
) -> None:
    """The shipped SchedwatchDegraded rule, its `for: 10m` shortened to 5 s (tests/support/alert_rules.py), on a
    real Prometheus scraping the agent whose sched program was refused: it fires for sched alone, with the cause."""
    instance = f"127.0.0.1:{refused_agent.port}"
    rules = alert_rules.compressed(tmp_path / "alerts.yaml", windows=1, holds=120)
    prometheus = Prometheus(tmp_path, [instance], rule_files=[rules])
    try:
        deadline = time.monotonic() + 90
        while True:
            alerts = [a for a in prometheus.api("alerts")["alerts"] if a["labels"]["alertname"] == "SchedwatchDegraded"]
            if any(alert["state"] == "firing" for alert in alerts) or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert [alert["state"] for alert in alerts] == ["firing"], alerts
        labels = {key: alerts[0]["labels"][key] for key in ("instance", "source", "runs_as", "cause", "severity")}
        assert labels == {
            "instance": instance,
            "source": "sched",
            "runs_as": "perf",
            "cause": "load_failed",
            "severity": "warning",
        }
        assert alerts[0]["annotations"]["summary"] == (
            f"schedwatch collector sched on {instance} runs without BPF (load_failed; now: perf)"
        )
        assert "the agent's log (event collector_failed_to_start)" in alerts[0]["annotations"]["description"]
    finally:
        prometheus.stop()


def check(state: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    require_root()
    return subprocess.run(
        [sys.executable, "-m", "agent", "check", "--state-dir", str(state), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=refusing_environment(),
    )


def test_check_in_auto_mode_says_which_program_was_refused_why_and_what_counts_instead(tmp_path: Path) -> None:
    result = check(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "  mode         bpf (--mode auto): the BPF programs can be loaded here, except for sched (degraded)" in lines
    assert f"  degraded     sched runs in its perf form (its BPF program did not load): {REFUSED}" in lines
    assert any(line.startswith("  mode runs    sched ok: run-queue wait and on-CPU time") for line in lines)
    assert any(
        line.startswith(f"  sched            CANNOT RUN: {REFUSED} — fix: a defect of schedwatch") for line in lines
    )
    assert any(line.startswith("  syscalls         ok ") for line in lines), result.stdout


def test_check_in_bpf_mode_exits_1_with_the_verifiers_reason(tmp_path: Path) -> None:
    result = check(tmp_path, "--mode", "bpf", "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert_valid(report)
    assert report["ok"] is False and report["mode"]["mode"] == "bpf"
    assert report["collectors"]["sched"] | {"fix": ""} == {
        "name": "sched",
        "description": report["collectors"]["sched"]["description"],
        "ok": False,
        "reason": REFUSED,
        "fix": "",
    }
    assert report["collectors"]["syscalls"]["ok"] is True
    assert report["degraded"] == {}, "bpf mode falls back to nothing: the collector is down, and check says why"


def test_diagnose_loading_the_collectors_here_says_which_counts_without_bpf(tmp_path: Path) -> None:
    require_root()
    result = subprocess.run(
        [sys.executable, "-m", "agent", "diagnose", "--json", "--duration", "1", "--state-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=refusing_environment(),
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_valid(report)
    assert report["sources"] == ["bpf; without BPF: sched (collectors loaded by diagnose)"]
    logged_lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    degraded = [line for line in logged_lines if line["event"] == "collector_degraded"]
    assert [(line["collector"], line["runs_as"], line["reason"]) for line in degraded] == [("sched", "perf", REFUSED)]
