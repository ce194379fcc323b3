"""Record tests/unit/fixtures/prometheus/young_workload_range.json: every answer a real Prometheus gives the queries
of ``PrometheusSource.node_windows(30)``, by query.

A small HTTP server serves schedwatch series of two workloads at known rates, computed when each scrape is
answered: ``/old`` the whole time (0.5 user + 0.25 system CPU, 1000 sched_yield/s, 2 threads) and ``/young`` from
23 s before the window's end (1.5 user + 0.5 system CPU, 4000 sched_yield/s, 8 threads, counters from 0). The
machine's ``prometheus`` scrapes it every 2 s; 41 s after it started, diagnose's queries of the 30 s window before
the 40th second are asked and their answers written with the time they were evaluated at.

    python -m tests.support.record_fleet_window tests/unit/fixtures/prometheus/young_workload_range.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent.diagnosis.inputs.live.fleet import PrometheusSource
from tests.support.prometheus import Prometheus

WINDOW = 30
YOUNG_AGE = 23.0  # seconds before the window's end that /young appears
OLD = {"user": 0.5, "system": 0.25, "yields": 1000.0, "threads": 2, "since": 80.0}  # running 80 s before the start
YOUNG = {"user": 1.5, "system": 0.5, "yields": 4000.0, "threads": 8}


class Served:
    """The two workloads' series, as of the moment they are asked for."""

    def __init__(self, started: float, young_from: float) -> None:
        self.started, self.young_from = started, young_from

    def text(self, now: float) -> str:
        lines = [
            "# TYPE schedwatch_build_info gauge",
            'schedwatch_build_info{version="recording"} 1',
            "# TYPE schedwatch_source_up gauge",
            *(f'schedwatch_source_up{{source="{source}"}} 1' for source in ("cgroup_cpu", "sched", "syscalls")),
        ]
        workloads = [("/old", OLD, now - self.started + float(OLD["since"]))]
        if now >= self.young_from:
            workloads.append(("/young", YOUNG, now - self.young_from))
        usage, yields, threads = [], [], []
        for cgroup, rates, age in workloads:
            for mode in ("user", "system"):
                labels = f'cgroup="{cgroup}",mode="{mode}"'
                usage.append(f"schedwatch_cpu_usage_seconds_total{{{labels}}} {rates[mode] * age:.6f}")
            yields.append(f'schedwatch_sched_yield_calls_total{{cgroup="{cgroup}"}} {rates["yields"] * age:.3f}')
            threads.append(f'schedwatch_threads{{cgroup="{cgroup}"}} {rates["threads"]}')
        lines += ["# TYPE schedwatch_cpu_usage_seconds_total counter", *usage]
        lines += ["# TYPE schedwatch_sched_yield_calls_total counter", *yields]
        lines += ["# TYPE schedwatch_threads gauge", *threads]
        return "\n".join(lines) + "\n"


def serve(served: Served) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = served.text(time.time()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Recording(PrometheusSource):
    """A PrometheusSource that keeps every answer by query."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.answers: dict[str, list[dict[str, Any]]] = {}

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = super().query(expr)
        self.answers[expr] = answer
        return answer


def record(out: Path) -> None:
    started = time.time()
    at = started + WINDOW + 10.0
    server = serve(Served(started, at - YOUNG_AGE))
    with tempfile.TemporaryDirectory() as work:
        prometheus = Prometheus(Path(work), [f"127.0.0.1:{server.server_port}"], scrape_interval="2s")
        try:
            time.sleep(max(0.0, at + 1.0 - time.time()))
            source = Recording(f"prometheus+{prometheus.url}")
            source.node_windows(WINDOW, at=at)
        finally:
            prometheus.stop()
            server.shutdown()
    document = {"evaluated_at": source.evaluated_at, "seconds": WINDOW, "answers": source.answers}
    out.write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    record(Path(sys.argv[1]))
