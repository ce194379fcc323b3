"""Make docs/img/yield-storm.png: Prometheus' graph of a real yield storm (numpy 1.26 pool, threads unset, then
one thread per worker), scraped from a live agent, rendered by headless Chromium. Run as root from the checkout:
    .venv/bin/python scripts/screenshot-yield-storm.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.agent import AgentProcess  # noqa: E402
from tests.support.containers import Podman  # noqa: E402
from tests.support.prometheus import Prometheus  # noqa: E402

IMAGE = "localhost/schedwatch-workload:test"
EXPR = 'sum by (container) (rate(schedwatch_sched_yield_calls_total{container=~".+"}[10s]))'


def main() -> None:
    subprocess.run(
        [str(REPO / "scripts" / "build-image.sh"), IMAGE, str(REPO / "tests/workloads/Containerfile")],
        check=True,
        capture_output=True,
    )
    work = Path(tempfile.mkdtemp(prefix="schedwatch-shot-"))
    podman = Podman()
    agent = AgentProcess(work / "agent.log", "--runtime.docker-sockets", str(podman.socket))
    agent.wait_ready()
    prometheus = Prometheus(work, [f"127.0.0.1:{agent.port}"], scrape_interval="2s")
    try:
        for name, threads in (("pool-threads-unset", "unset"), ("pool-one-thread-per-worker", "1")):
            subprocess.run(
                [
                    "podman",
                    "run",
                    "--rm",
                    "--name",
                    name,
                    IMAGE,
                    "/opt/numpy1/bin/python",
                    "/numpy_pool.py",
                    "-",
                    "4",
                    threads,
                    "60s",
                    "0",
                ],
                check=True,
                capture_output=True,
            )
            time.sleep(10)
        query = urllib.parse.urlencode(
            {"g0.expr": EXPR, "g0.tab": "0", "g0.range_input": "3m", "g0.stacked": "0", "g0.show_exemplars": "0"}
        )
        output = REPO / "docs" / "img" / "yield-storm.png"
        output.parent.mkdir(exist_ok=True)
        subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={work / 'chromium'}",
                "--window-size=1400,800",
                "--virtual-time-budget=8000",
                f"--screenshot={output}",
                f"{prometheus.url}/graph?{query}",
            ],
            check=True,
            capture_output=True,
        )
        print(output)
    finally:
        prometheus.stop()
        agent.stop()
        podman.close()


if __name__ == "__main__":
    main()
