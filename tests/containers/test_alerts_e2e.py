"""End to end: agent -> Prometheus (the shipped rules, time-compressed) -> Alertmanager -> a webhook.

A real Python multiprocessing pool on numpy 1.26's OpenBLAS (threads unset) makes the yield-storm alert reach
the webhook; the same pool on numpy 2.x (user-space spinning, no yields) makes a run-queue alert fire; both
fixed variants fire nothing: as many workers as CPUs, one BLAS thread each (4 single-threaded workers on 2 CPUs
still wait for each other's slices, and the run-queue alert may rightly fire for them). A sick phase ends once its
verdict is in (the alert it must fire fired, and every alert it must not fire had its whole window and `for`); a
fixed phase runs its whole time, after the sick one before it is gone.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import alert_rules
from tests.support.agent import AgentProcess
from tests.support.alertmanager import Alertmanager, WebhookReceiver
from tests.support.containers import REPO, Podman
from tests.support.prometheus import Prometheus

WORKLOAD_IMAGE = "localhost/schedwatch-workload:test"
COMPRESSION = 12  # 2 m -> 10 s: the same expressions and thresholds, on a shorter clock
PHASE_SECONDS = 40
# Before a phase that must stay quiet: the sick pool's teardown (Podman's, the agent's) is over. In a run without it
# (2026-12-07, under the exclusive lock) both fixed phases fired SchedwatchRunQueueLatencyHigh.
SETTLE_SECONDS = 15
WORKERS = 4  # the pool as written: 4 workers, each sizing its BLAS pool to every CPU
CPUS = os.cpu_count() or 1  # the fixed pool: workers x 1 thread fit the CPUs


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
) -> Iterator[tuple[Prometheus, WebhookReceiver, Path]]:
    """Prometheus on the compressed rules (their path is the third item), Alertmanager and its webhook."""
    workdir = tmp_path_factory.mktemp("alerting")
    rules = alert_rules.compressed(workdir / "alerts.yaml", windows=COMPRESSION, holds=COMPRESSION)
    webhook = WebhookReceiver()
    alertmanager = Alertmanager(workdir, webhook.url)
    prometheus = Prometheus(
        workdir,
        [f"127.0.0.1:{container_agent.port}"],
        scrape_interval="1s",
        rule_files=[rules],
        alertmanager=alertmanager.address,
    )
    yield prometheus, webhook, rules
    prometheus.stop()
    alertmanager.stop()
    webhook.stop()


def run_phase(
    podman: Podman,
    prometheus: Prometheus,
    name: str,
    numpy: str,
    workers: int,
    threads: str,
    settled: Callable[[set[str], float], bool] = lambda fired, seconds: False,
) -> set[str]:
    """Run the pool in a container for up to PHASE_SECONDS; return the alerts that fired for it meanwhile. The phase
    ends sooner once *settled* (the alerts fired so far, the seconds the phase has run) says its verdict is in."""
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
    started = time.monotonic()
    while time.monotonic() < started + PHASE_SECONDS + 5:
        for alert in prometheus.api("alerts")["alerts"]:
            if alert["state"] == "firing" and alert["labels"].get("container") == container:
                fired.add(alert["labels"]["alertname"])
        if settled(fired, time.monotonic() - started):
            break
        time.sleep(1)
    podman.remove(container)
    return fired


def test_numpy_pools_fire_the_right_alerts(podman: Podman, alerting: tuple[Prometheus, WebhookReceiver, Path]) -> None:
    build_workload_image()
    prometheus, webhook, rules = alerting
    storm_decided = alert_rules.decided_after(rules, "SchedwatchYieldStorm")
    run_queue = {"SchedwatchRunQueueLatencyHigh", "SchedwatchCPUOversubscribed"}
    fired: dict[str, set[str]] = {}
    # The storm fired: this phase's verdict is in.
    fired["numpy1-unset"] = run_phase(
        podman, prometheus, "numpy1-unset", "numpy1", WORKERS, "unset", lambda fired, _: "SchedwatchYieldStorm" in fired
    )
    # Nothing may fire: the whole phase, once the sick pool's teardown is over.
    time.sleep(SETTLE_SECONDS)
    fired["numpy1-fixed"] = run_phase(podman, prometheus, "numpy1-fixed", "numpy1", CPUS, "1")
    # A run-queue alert fired, and the storm alert had its whole chance to fire (it must not).
    fired["numpy2-unset"] = run_phase(
        podman,
        prometheus,
        "numpy2-unset",
        "numpy2",
        WORKERS,
        "unset",
        lambda fired, seconds: bool(fired & run_queue) and seconds >= storm_decided,
    )
    time.sleep(SETTLE_SECONDS)
    fired["numpy2-fixed"] = run_phase(podman, prometheus, "numpy2-fixed", "numpy2", CPUS, "1")
    assert "SchedwatchYieldStorm" in fired["numpy1-unset"], fired
    assert "SchedwatchYieldStorm" not in fired["numpy2-unset"], fired
    assert fired["numpy2-unset"] & run_queue, fired
    assert fired["numpy1-fixed"] == set() and fired["numpy2-fixed"] == set(), fired
    # The yield storm reached Alertmanager and its receiver, with the workload named.
    delivered = {(a["labels"]["alertname"], a["labels"].get("container")) for a in webhook.alerts}
    assert ("SchedwatchYieldStorm", f"{podman.prefix}-numpy1-unset") in delivered, delivered
    assert all(not c.endswith("-fixed") for _, c in delivered if c), delivered
