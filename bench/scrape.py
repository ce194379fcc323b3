"""Issue-13 benchmark: what one scrape costs the agent with N workloads, beside Debian's prometheus-node-exporter
serving the same lines from its textfile collector (the reference for what a Go exporter costs).

`python -m bench scrape [--repetitions N]`: N cgroups (cgroup2), each holding one process that made a distinct
number of sched_yield calls and then sleeps, so every workload has its full set of series. For 100 and then 1,000
workloads: the agent's CPU time per scrape (all its threads, less its idle rate: the usage_usec of a cgroup2
directory the agent alone is moved into, microseconds where /proc/PID/stat counts 10 ms ticks), the scrape's
wall time and bytes, plain and gzip-compressed (what Prometheus asks for), over SCRAPES back-to-back scrapes; then
per scrape at a steady STEADY_INTERVAL, where the agent's live diagnosis also judges each scrape between scrapes
(the number to hold against a Prometheus scraping every 10-15 s); and the agent's memory. Then node-exporter 1.5
with only its textfile collector, fed the agent's own schedwatch_* lines, scraped back to back the same way (it
does nothing between scrapes). Medians over the repetitions.

`python -m bench.scrape --sizes 1000 --interval 15 --no-peer --repetitions 3` runs one size alone (a few minutes):
the issue-33 footprint figure. At the steady interval it also reports what the idle-rate subtraction leaves out,
the agent's background ticks (its CPU per second with no scrape, times the interval), and their sum with the
per-scrape cost: everything the agent spends per scrape interval.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from agent.machine.cgroups.files import parse_flat_keyed
from agent.machine.fdlimit import raise_fd_limit
from bench.common import BENCH, Agent, Background, free_port, require, wait_for_http
from tests.load.churn import agent_memory_kb
from tests.support.workloads import CgroupSandbox, Workload, build

SIZES = (100, 1_000)
SCRAPES = 10
STEADY_INTERVAL = 10.0  # seconds between scrapes: the agent's live diagnosis judges each scrape at this interval
FOOTPRINT_INTERVAL = 15.0  # issue 33's budget: a Prometheus scraping every 15 s
STEADY_SCRAPES = 4
SETTLE_SECONDS = 2.0  # before an idle window: the agent judges the last scrape within a main-loop poll of it
NODE_EXPORTER = "prometheus-node-exporter"
YIELDS = "schedwatch_sched_yield_calls_total"


class CpuMeter:
    """The CPU time of one process, every thread it ever had, to the microsecond: it is moved into a cgroup2
    directory of its own (*sandbox* removes it), whose cpu.stat counts without any controller enabled."""

    def __init__(self, sandbox: CgroupSandbox, name: str, pid: int) -> None:
        self.directory = sandbox.make(name)
        (self.directory / "cgroup.procs").write_text(str(pid))

    def seconds(self) -> float:
        """CPU seconds used in the directory so far."""
        usage = parse_flat_keyed((self.directory / "cpu.stat").read_text()).get("usage_usec")
        if usage is None:
            raise RuntimeError(f"bench: no usage_usec in {self.directory}/cpu.stat: this kernel's cgroup2 is too old")
        return usage / 1e6


def fetch(url: str, gzip: bool) -> bytes:
    """One scrape's body as sent (compressed when *gzip*)."""
    headers = {"Accept-Encoding": "gzip"} if gzip else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as response:
        return bytes(response.read())


def scrape_cost(meter: CpuMeter, url: str, gzip: bool) -> dict[str, float]:
    """CPU seconds per scrape (the process's idle rate over as long subtracted), wall seconds per scrape, bytes."""
    time.sleep(SETTLE_SECONDS)
    idle_began, idle_cpu = time.monotonic(), meter.seconds()
    time.sleep(3)
    idle_rate = (meter.seconds() - idle_cpu) / (time.monotonic() - idle_began)
    began, cpu = time.monotonic(), meter.seconds()
    size = 0
    for _ in range(SCRAPES):
        size = len(fetch(url, gzip))
    wall = time.monotonic() - began
    used = meter.seconds() - cpu - idle_rate * wall
    return {"cpu_ms": 1000 * used / SCRAPES, "wall_ms": 1000 * wall / SCRAPES, "bytes": size}


def series(text: str) -> int:
    """Sample lines of an exposition text."""
    return sum(1 for line in text.splitlines() if line and not line.startswith("#"))


def schedwatch_lines(text: str) -> str:
    """The schedwatch_* families of a scrape (node-exporter serves its own process_* metrics)."""
    kept, keep = [], False
    for line in text.splitlines():
        if line.startswith("# HELP "):
            keep = line.split()[2].startswith("schedwatch_")
        if keep:
            kept.append(line)
    return "\n".join(kept) + "\n"


def wait_for_workloads(url: str, prefix: str, count: int, timeout: float = 120) -> str:
    """A scrape showing a yield series for *count* cgroups under *prefix*."""
    deadline = time.monotonic() + timeout
    while True:
        text = fetch(url, False).decode()
        seen = sum(1 for line in text.splitlines() if line.startswith(YIELDS) and prefix in line)
        if seen >= count or time.monotonic() > deadline:
            if seen < count:
                raise RuntimeError(
                    f"bench: only {seen} of {count} workloads exported after {timeout} s: "
                    "see the agent's log, and raise --max-cgroups if its cgroups map is full"
                )
            return text
        time.sleep(1)


def node_exporter(text: str, directory: Path) -> tuple[Background, str]:
    """node-exporter with only its textfile collector, serving *text*."""
    (directory / "schedwatch.prom").write_text(text)
    url = f"http://127.0.0.1:{free_port()}/metrics"
    command = [
        NODE_EXPORTER,
        f"--web.listen-address={url.split('/')[2]}",
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={directory}",
    ]
    return Background(command, wait_for_http(url)), url


def steady_cost(meter: CpuMeter, url: str, interval: float) -> dict[str, float]:
    """CPU ms per scrape with scrapes *interval* apart, gzip-compressed as Prometheus asks: everything the process
    does for a scrape, the work between scrapes (the agent's live diagnosis of what it served) included, less its
    idle rate (`cpu_ms`); the idle rate times the interval (`ticks_ms`: what the agent does between scrapes with
    none served, its background ticks); and the two together (`total_ms`: all its CPU per scrape interval)."""
    time.sleep(SETTLE_SECONDS)
    idle_began, idle_cpu = time.monotonic(), meter.seconds()
    time.sleep(interval)
    idle_rate = (meter.seconds() - idle_cpu) / (time.monotonic() - idle_began)
    began, cpu = time.monotonic(), meter.seconds()
    for _ in range(STEADY_SCRAPES):
        fetch(url, True)
        time.sleep(interval)
    elapsed = time.monotonic() - began
    used = meter.seconds() - cpu
    return {
        "cpu_ms": 1000 * (used - idle_rate * elapsed) / STEADY_SCRAPES,
        "ticks_ms": 1000 * idle_rate * interval,
        "total_ms": 1000 * used / STEADY_SCRAPES,
    }


def measure(pid: int, meter: CpuMeter, url: str, repetitions: int, steady: float | None) -> dict[str, Any]:
    """Medians of each cost, plain and gzip (and with scrapes *steady* seconds apart unless None), and memory
    after."""
    result: dict[str, Any] = {}
    for gzip in (False, True):
        runs = [scrape_cost(meter, url, gzip) for _ in range(repetitions)]
        result["gzip" if gzip else "plain"] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        result["gzip" if gzip else "plain"]["cpu_ms_runs"] = [round(r["cpu_ms"], 1) for r in runs]
    if steady is not None:
        runs_steady = [steady_cost(meter, url, steady) for _ in range(repetitions)]
        result["steady_interval"] = steady
        for key in ("cpu_ms", "ticks_ms", "total_ms"):
            result[f"steady_{key}"] = statistics.median(r[key] for r in runs_steady)
            result[f"steady_{key}_runs"] = [round(r[key], 1) for r in runs_steady]
    rss, anon = agent_memory_kb(pid)
    result["rss_mb"], result["anon_mb"] = rss / 1024, anon / 1024
    return result


def run(
    repetitions: int, sizes: tuple[int, ...] = SIZES, interval: float = STEADY_INTERVAL, peer: bool = True
) -> dict[str, Any]:
    """Each size, the agent (scraped back to back, then every *interval* seconds) then node-exporter (unless not
    *peer*) at each."""
    if peer:
        require(NODE_EXPORTER)
    raise_fd_limit()
    yielder = build("yielder")
    sandbox, meters = CgroupSandbox(), CgroupSandbox()
    agent = Agent()
    held: list[Workload] = []
    results: dict[str, Any] = {"repetitions": repetitions, "scrapes": SCRAPES, "sizes": {}}
    prefix = f'cgroup="{sandbox.relative(sandbox.base)}/'
    try:
        agent_meter = CpuMeter(meters, "agent", agent.process.pid)
        for size in sizes:
            while len(held) < size:
                group = sandbox.make(f"w{len(held)}")
                held.append(Workload(yielder, group, 1_000 + len(held), 1))
            text = wait_for_workloads(agent.url, prefix, size)
            time.sleep(2)
            entry: dict[str, Any] = {"series": series(text)}
            entry["agent"] = measure(agent.process.pid, agent_meter, agent.url, repetitions, steady=interval)
            results["sizes"][str(size)] = entry
            if not peer:
                continue
            with tempfile.TemporaryDirectory() as directory:
                node, url = node_exporter(schedwatch_lines(text), Path(directory))
                try:
                    entry["peer_series"] = series(fetch(url, False).decode())
                    peer_meter = CpuMeter(meters, "node-exporter", node.process.pid)
                    entry["node_exporter"] = measure(node.process.pid, peer_meter, url, repetitions, steady=None)
                finally:
                    node.stop()
    finally:
        for workload in held:
            workload.release()
        agent.stop()
        sandbox.cleanup()
        meters.cleanup()
    return results


def report(result: dict[str, Any]) -> str:
    """Markdown: per size, agent and node-exporter side by side; then the agent's whole cost per scrape interval."""
    interval = next(iter(result["sizes"].values()))["agent"].get("steady_interval", STEADY_INTERVAL)
    lines = [
        f"Median of {result['repetitions']} runs of {result['scrapes']} back-to-back scrapes; CPU ms per scrape "
        "(all threads, idle rate subtracted); RSS / anonymous MB after",
        "",
        "| workloads | series (agent / node-exporter) | exporter | CPU ms, plain | CPU ms, gzip | CPU ms, gzip, "
        f"every {interval:.0f} s | wall ms, plain | MB sent, plain / gzip | RSS MB | anon MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for size, entry in result["sizes"].items():
        for name in ("agent", "node_exporter"):
            if name not in entry:
                continue
            cost = entry[name]
            steady = f"{cost['steady_cpu_ms']:.1f}" if "steady_cpu_ms" in cost else "(as gzip)"
            peer_series = f"{entry['peer_series']:,}" if "peer_series" in entry else "-"
            lines.append(
                f"| {int(size):,} | {entry['series']:,} / {peer_series} | {name.replace('_', '-')} "
                f"| {cost['plain']['cpu_ms']:.1f} | {cost['gzip']['cpu_ms']:.1f} | {steady} "
                f"| {cost['plain']['wall_ms']:.1f} "
                f"| {cost['plain']['bytes'] / 1e6:.2f} / {cost['gzip']['bytes'] / 1e6:.2f} "
                f"| {cost['rss_mb']:.0f} | {cost['anon_mb']:.0f} |"
            )
    lines += [
        "",
        f"The agent per scrape interval ({interval:.0f} s, gzip): the scrape and what follows it, plus its background "
        "ticks (CPU per second with no scrape, times the interval); runs in brackets",
        "",
        "| workloads | per scrape, ms | background ticks, ms | all per interval, ms |",
        "| --- | --- | --- | --- |",
    ]
    for size, entry in result["sizes"].items():
        cost = entry["agent"]
        if "steady_total_ms" not in cost:
            continue
        lines.append(
            f"| {int(size):,} | {cost['steady_cpu_ms']:.1f} {cost['steady_cpu_ms_runs']} "
            f"| {cost['steady_ticks_ms']:.1f} {cost['steady_ticks_ms_runs']} "
            f"| **{cost['steady_total_ms']:.1f}** {cost['steady_total_ms_runs']} |"
        )
    return "\n".join(lines)


def main() -> None:
    """`python -m bench.scrape`: chosen sizes and interval, node-exporter optional; prints Markdown, keeps JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.scrape", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="workload counts, in order")
    parser.add_argument("--interval", type=float, default=FOOTPRINT_INTERVAL, help="seconds between steady scrapes")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--no-peer", action="store_true", help="skip node-exporter")
    args = parser.parse_args()
    result = run(args.repetitions, tuple(args.sizes), args.interval, peer=not args.no_peer)
    out = BENCH / "results" / f"scrape-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"{report(result)}\n\nraw samples: {out}", flush=True)


if __name__ == "__main__":
    main()
