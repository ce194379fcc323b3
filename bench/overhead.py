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
import math
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Agent, Background, Stoppable, free_port, median, require, wait_for_line
from bench.syscalls import bcc_tool

SCRAPE_SECONDS = 15.0  # a Prometheus' usual scrape interval
SETTLE_SECONDS = 2.0  # after a tracer is ready, before measuring: its start-up work is not the server's cost
REQUESTS = 50_000  # per test: short rounds, many of them (the host moves a round by +-25 points)
CLIENTS = 50
SERVER_CPU, CLIENT_CPU = "1", "0"  # redis-server and redis-benchmark pinned apart
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


def chosen(only: Sequence[str]) -> list[Setup]:
    """The baseline and the configurations named in *only* (all when empty); SystemExit naming the known ones for
    a name that is not one."""
    every = setups()
    names = [setup.name for setup in every]
    unknown = [name for name in only if name not in names]
    if unknown:
        known = " ".join(f"--config {name!r}" for name in names[1:])
        raise SystemExit(f"bench overhead: no configuration {unknown[0]!r}; the configurations: {known}")
    return [setup for setup in every if setup.name == BASELINE or not only or setup.name in only]


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
            [
                *("taskset", "-c", SERVER_CPU, "redis-server", "--port", str(self.port)),
                *("--save", "", "--appendonly", "no", "--bind", "127.0.0.1"),
            ],
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
        command = [
            *("taskset", "-c", CLIENT_CPU, "redis-benchmark", "-p", str(self.port)),
            *("-n", str(REQUESTS), "-c", str(CLIENTS), "-t", "set,get"),
        ]
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


def busy_share(seconds: float = 1.0) -> float:
    """The share of the machine's CPU time that was busy over *seconds* (/proc/stat): measured between rounds, with
    nothing of the benchmark's running but the idle redis-server, it tells a round that something else shared the
    machine."""

    def times() -> tuple[int, int]:
        ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # idle + iowait

    total, idle = times()
    time.sleep(seconds)
    total_after, idle_after = times()
    return 1.0 - (idle_after - idle) / max(1, total_after - total)


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


def run(repetitions: int, only: Sequence[str] = ()) -> dict[str, Any]:
    """Every configuration (or those named in *only*, the baseline always) once per round, rotated; raw rates and
    each round's loss against its baseline."""
    require("redis-server", "redis-benchmark", "redis-cli", "perf", "bpftrace", "runqlat-bpfcc", "syscount-bpfcc")
    order = chosen(only)
    samples: dict[str, dict[str, list[float]]] = {s.name: {m: [] for m in MEASURES} for s in order}
    losses: dict[str, dict[str, list[float]]] = {s.name: {m: [] for m in MEASURES} for s in order[1:]}
    busy: list[float] = []
    redis = Redis()
    try:
        for round_index in range(repetitions):
            busy.append(busy_share())
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
    return {"repetitions": repetitions, "samples": samples, "losses": losses, "busy_before_round": busy}


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
    lines += [
        "",
        "Each round's ratio to the same round's nothing-attached run: median, and the distribution-free 95 % "
        "confidence range of that median (order statistics of the rounds' ratios):",
        "",
    ]
    for name, measures in result["losses"].items():
        cells = []
        for measure in MEASURES:
            ratios = [1.0 - loss / 100.0 for loss in measures[measure]]
            low, high = median_range(ratios)
            cells.append(f"{measure} {median(ratios):.3f} ({low:.3f} to {high:.3f})")
        lines.append(f"- {name}: " + "; ".join(cells))
    busy = ", ".join(f"{100 * share:.0f} %" for share in result.get("busy_before_round", []))
    lines += ["", f"The machine's CPU busy in the second before each round, nothing of the benchmark running: {busy}"]
    return "\n".join(lines)


def median_range(values: Sequence[float]) -> tuple[float, float]:
    """The distribution-free ~95 % confidence range of the median of *values*: the order statistics k and n-k+1 with
    k = (n - 1.96 sqrt(n)) / 2 rounded down (at least the first), the normal approximation of the binomial."""
    ordered = sorted(values)
    n = len(ordered)
    k = max(1, math.floor((n - 1.96 * math.sqrt(n)) / 2))
    return ordered[k - 1], ordered[n - k]
