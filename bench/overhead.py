"""Issue-33 benchmark: what a user pays on a real server, with schedwatch at its defaults and beside its peers.

Two servers, each driven as hard as this machine allows:

- redis (Debian's `redis-server`, no persistence) under `redis-benchmark -n 200000 -c 50 -t get,set`: system-call
  heavy (every request is a read and a write on both sides, ~10 system calls in all). Requests per second of SET
  and of GET.
- `perf bench sched messaging` (10 groups of 20 senders and 20 receivers over sockets, 100 loops): context-switch
  heavy. Its total time, as messages per second (the same messages each run).

Configurations, in a different order each round (rotated, so that drift over the run falls on each alike): nothing
attached; schedwatch at its defaults (`schedwatch run`, scraped every 15 s as a Prometheus would, its standing
evaluation included); schedwatch with the syscall_families collector on (off by default: every system call of the
node runs its programs); and what a person would otherwise run on the node: `perf trace -s -a`, bcc's
`syscount-bpfcc` and `runqlat-bpfcc`, and bpftrace counting system calls per cgroup. Each round measures every
configuration once; the loss of a configuration is against the nothing-attached run of the same round, and the
table gives the median over the rounds and their range.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from bench.common import Agent, Background, Stoppable, free_port, median, require, wait_for_line
from bench.syscalls import bcc_tool

SCRAPE_SECONDS = 15.0  # a Prometheus' usual scrape interval
SETTLE_SECONDS = 2.0  # after a tracer is ready, before measuring: its start-up work is not the server's cost
REQUESTS = 200_000
CLIENTS = 50
MESSAGING = ["perf", "bench", "sched", "messaging"]  # 10 groups, 40 tasks each, 100 loops: 400,000 messages
MESSAGES = 10 * 20 * 20 * 100
BASELINE = "nothing attached"
DEFAULTS = "schedwatch, defaults"
FAMILIES = "schedwatch, defaults + --collector.syscall_families"
BPFTRACE_PER_CGROUP = "tracepoint:raw_syscalls:sys_enter { @calls[cgroup] = count(); }"
MEASURES = ("redis SET", "redis GET", "messaging")  # each a rate: higher is better


class ScrapedAgent(Agent):
    """`schedwatch run` with *flags*, scraped every SCRAPE_SECONDS from a thread of the benchmark."""

    def __init__(self, *flags: str) -> None:
        super().__init__(*flags)
        self._stopping = threading.Event()
        self._scraper = threading.Thread(target=self._scrape, daemon=True)
        self._scraper.start()

    def _scrape(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(self.url, timeout=10).read()
            if self._stopping.wait(SCRAPE_SECONDS):
                return

    def stop(self) -> None:
        """Stop scraping, then the agent."""
        self._stopping.set()
        self._scraper.join()
        super().stop()


@dataclass(frozen=True)
class Setup:
    """A configuration: its name and how to start what it runs beside the servers (None: nothing)."""

    name: str
    start: Any = None  # Callable[[], Stoppable] | None


def setups() -> list[Setup]:
    """Every configuration compared, the baseline first."""
    return [
        Setup(BASELINE),
        Setup(DEFAULTS, lambda: ScrapedAgent()),
        Setup(FAMILIES, lambda: ScrapedAgent("--collector.syscall_families")),
        Setup("runqlat-bpfcc", lambda: bcc_tool("runqlat-bpfcc", ready="Tracing run queue latency")),
        Setup("syscount-bpfcc", lambda: bcc_tool("syscount-bpfcc", ready="Tracing syscalls")),
        Setup(
            "bpftrace, system calls per cgroup",
            lambda: Background(["bpftrace", "-e", BPFTRACE_PER_CGROUP], wait_for_line("Attaching")),
        ),
        Setup("perf trace -s -a", perf_trace),
    ]


def perf_trace() -> Stoppable:
    """`perf trace -s -a` (its summary to /dev/null), ready once it has opened its events."""

    def ready(process: subprocess.Popen[str]) -> None:
        time.sleep(3.0)  # perf trace prints nothing until it ends
        if process.poll() is not None:
            raise RuntimeError(f"perf trace exited with {process.returncode}")

    return Background(["perf", "trace", "-s", "-a", "-o", "/dev/null"], ready)


class Redis:
    """A redis-server on a free port, no persistence, for the whole run."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True).stdout != b"PONG\n":
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("redis-server did not answer PING within 10 s")
            time.sleep(0.1)

    def benchmark(self) -> dict[str, float]:
        """Requests per second of SET and GET."""
        command = ["redis-benchmark", "-p", str(self.port), "-n", str(REQUESTS), "-c", str(CLIENTS), "-t", "set,get"]
        output = subprocess.run([*command, "--csv"], capture_output=True, text=True, check=True).stdout
        rates = {}
        for line in output.splitlines():
            cells = [cell.strip('"') for cell in line.split(",")]
            if cells[0] in ("SET", "GET"):
                rates[f"redis {cells[0]}"] = float(cells[1])
        if len(rates) != 2:
            raise RuntimeError(f"redis-benchmark printed no SET and GET rates: {output!r}")
        return rates

    def stop(self) -> None:
        """Terminate the server and wait."""
        self.process.terminate()
        self.process.wait(10)


def messaging() -> float:
    """Messages per second of one `perf bench sched messaging` run."""
    output = subprocess.run(MESSAGING, capture_output=True, text=True, check=True).stdout
    found = re.search(r"Total time:\s*([0-9.]+)", output)
    if not found:
        raise RuntimeError(f"perf bench sched messaging printed no total time: {output!r}")
    return MESSAGES / float(found.group(1))


def measure_once(redis: Redis, setup: Setup) -> dict[str, float]:
    """Start *setup*, let it settle, drive both servers, stop it."""
    running = setup.start() if setup.start else None
    try:
        time.sleep(SETTLE_SECONDS)
        rates = redis.benchmark()
        rates["messaging"] = messaging()
    finally:
        if running is not None:
            running.stop()
    return rates


def run(repetitions: int) -> dict[str, Any]:
    """Every configuration once per round, rotated; raw rates and each round's loss against its baseline."""
    require("redis-server", "redis-benchmark", "redis-cli", "perf", "bpftrace", "runqlat-bpfcc", "syscount-bpfcc")
    order = setups()
    samples: dict[str, dict[str, list[float]]] = {s.name: {m: [] for m in MEASURES} for s in order}
    losses: dict[str, dict[str, list[float]]] = {s.name: {m: [] for m in MEASURES} for s in order[1:]}
    redis = Redis()
    try:
        for round_index in range(repetitions):
            shift = round_index % len(order)
            this_round = {}
            for setup in order[shift:] + order[:shift]:
                this_round[setup.name] = measure_once(redis, setup)
                print(f"  round {round_index + 1}/{repetitions}: {setup.name} {this_round[setup.name]}", flush=True)
            base = this_round[BASELINE]
            for name, rates in this_round.items():
                for measure in MEASURES:
                    samples[name][measure].append(rates[measure])
                    if name != BASELINE:
                        losses[name][measure].append(100.0 * (1.0 - rates[measure] / base[measure]))
    finally:
        redis.stop()
    return {"repetitions": repetitions, "samples": samples, "losses": losses}


def report(result: dict[str, Any]) -> str:
    """Medians of the rates; median loss against the same round's baseline, with the range over the rounds."""
    header = "| configuration | redis SET, req/s | redis GET, req/s | messaging, messages/s |"
    lines = [
        f"Median of {result['repetitions']} rounds; loss against nothing attached in the same round: median "
        "(lowest to highest)",
        "",
        header,
        "| --- | --- | --- | --- |",
    ]
    for name, measures in result["samples"].items():
        cells = []
        for measure in MEASURES:
            cell = f"{median(measures[measure]):,.0f}"
            if name != BASELINE:
                loss = result["losses"][name][measure]
                cell += f" ({-median(loss):+.1f} %; {-max(loss):+.1f} to {-min(loss):+.1f})"
            cells.append(cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
