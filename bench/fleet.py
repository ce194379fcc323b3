"""Issue-27 benchmark: what ranking a fleet through Prometheus costs at N nodes, from the raw series and from the
fleet recording rules (deploy/prometheus/fleet_rules.yaml).

`python -m bench fleet [--repetitions N]`:

1. A real agent on this machine, with a yield storm in a cgroup of its own, scraped twice
   TEMPLATE_SECONDS apart: every schedwatch_* series of every workload of this machine, with its rate.
2. That node written out as N nodes (instance labels node-0 ... node-N-1, each node's workloads repeated under
   distinct cgroups until it has WORKLOADS_PER_NODE) over SPAN_SECONDS at a 15 s scrape interval, counters
   growing at their measured rates, in OpenMetrics; `promtool tsdb create-blocks-from openmetrics` makes TSDB
   blocks of it.
3. A real Prometheus 2.42 on those blocks: the ranking (`schedwatch diagnose --from prometheus+URL`'s queries and
   ranking, in process) over a WINDOW_SECONDS window ending at the last sample, timed: wall time, and the CPU time
   the Prometheus server spent answering (its /proc/PID/stat ticks).
4. `promtool tsdb create-blocks-from rules` backfills the fleet recording rules from that Prometheus (15 s
   evaluations); Prometheus again on raw + recorded blocks, where the ranking reads the recorded rates.

Medians over the repetitions; the series count of each size. One CPU's worth of Prometheus work dominates.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from agent.commands.diagnose import fleet_ranking
from agent.diagnosis.inputs.live.fleet import PrometheusSource
from agent.identity.filter import Filter
from bench.common import Agent, free_port, median, require
from tests.support.workloads import CgroupSandbox, Workload, build

NODES = (10, 100)
WORKLOADS_PER_NODE = 100  # the design's fleet: 100 containers a node
TEMPLATE_SECONDS = 10.0
SCRAPE_INTERVAL = 15
SPAN_SECONDS = 7 * 60  # the window, the minute rate1m looks back, and a minute of margin
WINDOW_SECONDS = 300
TICKS = os.sysconf("SC_CLK_TCK")
COUNTER_SUFFIXES = ("_total", "_sum", "_count", "_bucket")

Sample = tuple[str, tuple[tuple[str, str], ...], float, float]  # name, labels, value, per-second growth


def template() -> list[Sample]:
    """Every schedwatch_* sample a real agent exports here beside a real yield storm, and its rate."""
    sandbox = CgroupSandbox()
    agent = Agent()
    held = []
    try:
        held.append(Workload(build("paced_yielder"), sandbox.make("storm"), 20))
        time.sleep(3)
        before = _samples(urllib.request.urlopen(agent.url, timeout=30).read().decode())
        time.sleep(TEMPLATE_SECONDS)
        after = _samples(urllib.request.urlopen(agent.url, timeout=30).read().decode())
    finally:
        for workload in held:
            workload.release()
        agent.stop()
        sandbox.cleanup()
    out = []
    for key, value in after.items():
        name, labels = key
        growth = 0.0
        if name.endswith(COUNTER_SUFFIXES) and key in before:
            growth = max(0.0, (value - before[key]) / TEMPLATE_SECONDS)
        out.append((name, labels, value, growth))
    return out


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("schedwatch_") and math.isfinite(sample.value):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def copies_for(samples: list[Sample]) -> int:
    """How many times each workload of *samples* is repeated for a node to have WORKLOADS_PER_NODE."""
    workloads = {dict(labels).get("cgroup") for _, labels, _, _ in samples} - {None, ""}
    return max(1, math.ceil(WORKLOADS_PER_NODE / max(1, len(workloads))))


def openmetrics(samples: list[Sample], nodes: int, end: int, copies: int) -> Iterator[str]:
    """*samples* as *nodes* nodes of *copies* copies of each workload, SPAN_SECONDS up to *end*, family by
    family."""
    times = range(end - SPAN_SECONDS, end + 1, SCRAPE_INTERVAL)
    by_name: dict[str, list[Sample]] = {}
    for sample in samples:
        by_name.setdefault(sample[0], []).append(sample)
    for name, group in by_name.items():
        yield f"# TYPE {name} unknown\n"
        for node in range(nodes):
            for _, labels, value, growth in group:
                cgroup = dict(labels).get("cgroup", "")
                for copy in range(copies) if cgroup else range(1):
                    relabelled = {**dict(labels), "instance": f"node-{node}:17953", "job": "schedwatch"}
                    if cgroup and copy:
                        relabelled["cgroup"] = f"{cgroup}/copy-{copy}"
                    text = ",".join(f'{k}="{_escaped(v)}"' for k, v in sorted(relabelled.items()))
                    for step, at in enumerate(times):
                        yield f"{name}{{{text}}} {value + growth * step * SCRAPE_INTERVAL:.6g} {at}\n"
    yield "# EOF\n"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Server:
    """Prometheus on a data directory of blocks, on a free port."""

    def __init__(self, data: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = data.parent / "prometheus.yml"
        config.write_text("global: {scrape_interval: 15s}\n")
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=30d",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2).read()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Prometheus did not start: see {log}") from None
                time.sleep(0.5)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)
        self._log.close()


def ranking_cost(server: Server, end: int, repetitions: int, recorded: bool) -> dict[str, Any]:
    """Wall and Prometheus CPU seconds of one whole ranking, per repetition; the workloads it ranked (it shows the
    top ones)."""
    walls, cpus, rows = [], [], 0
    for _ in range(repetitions):
        source = PrometheusSource(f"prometheus+{server.url}")
        cpu, wall = server.cpu_seconds(), time.perf_counter()
        windows = source.node_windows(WINDOW_SECONDS, at=float(end))
        fleet_ranking(windows, Filter(), WINDOW_SECONDS)
        walls.append(time.perf_counter() - wall)
        cpus.append(server.cpu_seconds() - cpu)
        assert source.recorded == recorded, "the ranking did not read the series it was meant to"
        rows = sum(len(node.window.after.workloads) for node in windows)
    return {"wall_s": walls, "prometheus_cpu_s": cpus, "rows": rows}


def one_size(samples: list[Sample], nodes: int, copies: int, repetitions: int, work: Path) -> dict[str, Any]:
    """Both rankings over *nodes* nodes."""
    end = int(time.time()) - 120
    raw, rules = work / "raw" / "data", work / "rules"
    raw.mkdir(parents=True)
    source = work / "series.om"
    with source.open("w") as out:
        out.writelines(openmetrics(samples, nodes, end, copies))
    series_count = sum(1 for line in source.open() if not line.startswith("#")) // (SPAN_SECONDS // SCRAPE_INTERVAL + 1)
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(raw)],
        check=True,
        capture_output=True,
    )
    source.unlink()
    result: dict[str, Any] = {"nodes": nodes, "series": series_count}
    server = Server(raw, work / "raw.log")
    try:
        result["raw"] = ranking_cost(server, end, repetitions, recorded=False)
        started = time.perf_counter()
        subprocess.run(
            [
                "promtool", "tsdb", "create-blocks-from", "rules",
                f"--start={end - SPAN_SECONDS + 60}", f"--end={end}", f"--url={server.url}",
                f"--eval-interval={SCRAPE_INTERVAL}s", f"--output-dir={rules}",
                str(Path(__file__).parent.parent / "deploy" / "prometheus" / "fleet_rules.yaml"),
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        result["backfill_s"] = time.perf_counter() - started
    finally:
        server.stop()
    both = work / "both" / "data"
    shutil.copytree(raw, both)
    for block in rules.iterdir():
        if block.is_dir():
            shutil.copytree(block, both / block.name)
    server = Server(both, work / "both.log")
    try:
        result["recorded"] = ranking_cost(server, end, repetitions, recorded=True)
    finally:
        server.stop()
    return result


def run(repetitions: int) -> dict[str, Any]:
    """Every size of NODES, raw then recorded."""
    require("prometheus", "promtool")
    samples = template()
    copies = copies_for(samples)
    result: dict[str, Any] = {"repetitions": repetitions, "window_s": WINDOW_SECONDS, "copies": copies, "sizes": []}
    result["template_series"] = len(samples)
    for nodes in NODES:
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as work:
            result["sizes"].append(one_size(samples, nodes, copies, repetitions, Path(work)))
    return result


def report(result: dict[str, Any]) -> str:
    """Markdown: per size, the ranking's wall and Prometheus CPU time from raw and from recorded series."""
    lines = [
        f"Median of {result['repetitions']} rankings over a {result['window_s']} s window; one node = this "
        f"machine's {result['template_series']} schedwatch series, its workloads repeated {result['copies']} times",
        "",
        "| nodes | series | workloads ranked | raw: wall s | raw: Prometheus CPU s | recorded: wall s "
        "| recorded: Prometheus CPU s | backfill of the rules, s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in result["sizes"]:
        raw, recorded = size["raw"], size["recorded"]
        lines.append(
            f"| {size['nodes']} | {size['series']:,} | {raw['rows']:,} | {median(raw['wall_s']):.2f} "
            f"| {median(raw['prometheus_cpu_s']):.2f} | {median(recorded['wall_s']):.2f} "
            f"| {median(recorded['prometheus_cpu_s']):.2f} | {size['backfill_s']:.0f} |"
        )
    return "\n".join(lines)
