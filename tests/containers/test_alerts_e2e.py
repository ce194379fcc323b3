"""End to end: agent -> Prometheus (the shipped rules, time-compressed) -> Alertmanager -> a webhook.

A real Python multiprocessing pool on numpy 1.26's OpenBLAS (threads unset) makes the yield-storm alert reach
the webhook; the same pool on numpy 2.x (user-space spinning, no yields) makes a run-queue alert fire; both
fixed variants fire nothing: as many workers as CPUs, one BLAS thread each (4 single-threaded workers on 2 CPUs
still wait for each other's slices, and the run-queue alert may rightly fire for them).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.agent import AgentProcess
from tests.support.alertmanager import Alertmanager, WebhookReceiver
from tests.support.containers import REPO, Podman
from tests.support.prometheus import Prometheus

RULES = REPO / "deploy" / "prometheus" / "alerts.yaml"
WORKLOAD_IMAGE = "localhost/schedwatch-workload:test"
COMPRESSION = 12  # 2 m -> 10 s: the same expressions and thresholds, on a shorter clock
PHASE_SECONDS = 40
WORKERS = 4  # the pool as written: 4 workers, each sizing its BLAS pool to every CPU
CPUS = os.cpu_count() or 1  # the fixed pool: workers x 1 thread fit the CPUs


def compressed_rules(target: Path) -> Path:
    """alerts.yaml with every `for` and range window divided by COMPRESSION."""

    def shorter(match: re.Match[str]) -> str:
        seconds = int(match.group(1)) * 60 // COMPRESSION
        return f"{match.group(0)[0]}{seconds}s"

    document = yaml.safe_load(RULES.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"\[(\d+)m", shorter, rule["expr"])
            rule["for"] = f"{int(rule['for'].rstrip('m')) * 60 // COMPRESSION}s"
    target.write_text(yaml.safe_dump(document))
    return target


def build_workload_image() -> None:
    result = subprocess.run(
        [str(REPO / "scripts" / "build-image.sh"), WORKLOAD_IMAGE, str(REPO / "tests" / "workloads" / "Containerfile")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


@pytest.fixture(scope="module")
def alerting(
    container_agent: AgentProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Prometheus, WebhookReceiver]]:
    workdir = tmp_path_factory.mktemp("alerting")
    webhook = WebhookReceiver()
    alertmanager = Alertmanager(workdir, webhook.url)
    prometheus = Prometheus(
        workdir,
        [f"127.0.0.1:{container_agent.port}"],
        scrape_interval="1s",
        rule_files=[compressed_rules(workdir / "alerts.yaml")],
        alertmanager=alertmanager.address,
    )
    yield prometheus, webhook
    prometheus.stop()
    alertmanager.stop()
    webhook.stop()


def run_phase(podman: Podman, prometheus: Prometheus, name: str, numpy: str, workers: int, threads: str) -> set[str]:
    """Run the pool in a container for PHASE_SECONDS; return the alerts that fired for it meanwhile."""
    container = f"{podman.prefix}-{name}"
    subprocess.run(
        [
            "podman",
            "run",
            "-d",
            "--name",
            container,
            WORKLOAD_IMAGE,
            f"/opt/{numpy}/bin/python",
            "/numpy_pool.py",
            "-",
            str(workers),
            threads,
            f"{PHASE_SECONDS}s",
            "0",
        ],
        check=True,
        capture_output=True,
    )
    fired: set[str] = set()
    deadline = time.monotonic() + PHASE_SECONDS + 5
    while time.monotonic() < deadline:
        for alert in prometheus.api("alerts")["alerts"]:
            if alert["state"] == "firing" and alert["labels"].get("container") == container:
                fired.add(alert["labels"]["alertname"])
        time.sleep(1)
    podman.remove(container)
    time.sleep(15)  # let the rate windows forget this phase before the next starts
    return fired


def test_numpy_pools_fire_the_right_alerts(podman: Podman, alerting: tuple[Prometheus, WebhookReceiver]) -> None:
    build_workload_image()
    prometheus, webhook = alerting
    fired = {
        "numpy1-unset": run_phase(podman, prometheus, "numpy1-unset", "numpy1", WORKERS, "unset"),
        "numpy1-fixed": run_phase(podman, prometheus, "numpy1-fixed", "numpy1", CPUS, "1"),
        "numpy2-unset": run_phase(podman, prometheus, "numpy2-unset", "numpy2", WORKERS, "unset"),
        "numpy2-fixed": run_phase(podman, prometheus, "numpy2-fixed", "numpy2", CPUS, "1"),
    }
    assert "SchedwatchYieldStorm" in fired["numpy1-unset"], fired
    assert "SchedwatchYieldStorm" not in fired["numpy2-unset"], fired
    assert fired["numpy2-unset"] & {"SchedwatchRunQueueLatencyHigh", "SchedwatchCPUOversubscribed"}, fired
    assert fired["numpy1-fixed"] == set() and fired["numpy2-fixed"] == set(), fired
    # The yield storm reached Alertmanager and its receiver, with the workload named.
    delivered = {(a["labels"]["alertname"], a["labels"].get("container")) for a in webhook.alerts}
    assert ("SchedwatchYieldStorm", f"{podman.prefix}-numpy1-unset") in delivered, delivered
    assert all(not c.endswith("-fixed") for _, c in delivered if c), delivered
