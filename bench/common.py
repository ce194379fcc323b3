"""Benchmark plumbing: build workloads, start tracers side by side, take medians."""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
BUILD = BENCH / "results" / "bin"


def build(name: str) -> Path:
    """Compile bench/workloads/<name>.c."""
    BUILD.mkdir(parents=True, exist_ok=True)
    binary = BUILD / name
    subprocess.run(
        ["gcc", "-O2", "-Wall", "-pthread", "-o", str(binary), str(BENCH / "workloads" / f"{name}.c")], check=True
    )
    return binary


class Background:
    """A tracer or agent running beside the workloads."""

    def __init__(
        self, command: Sequence[str], ready: Callable[[subprocess.Popen[str]], None], env: dict[str, str] | None = None
    ) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
            env=env,
        )
        ready(self.process)

    def stop(self) -> None:
        """Ask politely (stdin closed, SIGINT), then insist."""
        if self.process.stdin:
            self.process.stdin.close()
        self.process.send_signal(2)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wait_for_line(text: str) -> Callable[[subprocess.Popen[str]], None]:
    """Ready when the process prints a line containing *text*."""

    def ready(process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if text in line:
                time.sleep(0.3)  # let the last probes attach
                return
        raise RuntimeError(f"{process.args!r} exited before printing {text!r}")

    return ready


def wait_for_http(url: str, timeout: float = 60) -> Callable[[subprocess.Popen[str]], None]:
    """Ready when *url* answers."""

    def ready(process: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
            try:
                urllib.request.urlopen(url, timeout=2).read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{url} did not answer")

    return ready


class Stoppable(Protocol):
    """Something running beside the workloads."""

    def stop(self) -> None:
        """Stop it and wait."""


@dataclass
class Config:
    """One way of watching the workloads: nothing, a system-wide tracer, or a wrapper command."""

    name: str
    start: Callable[[], Stoppable | None] = lambda: None
    wrap: list[str] = field(default_factory=list)
    divisor: int = 1  # slow tracers run fewer operations (the result is per operation)


@dataclass(frozen=True)
class Workload:
    """A command that reports its own nanoseconds per operation."""

    name: str
    command: Callable[[int], list[str]]  # operation count -> argv
    count: int
    parse: Callable[[str], float] = lambda output: float(
        json.loads([line for line in output.splitlines() if line.startswith("{")][-1])["ns_per_op"]
    )

    def run(self, wrap: Sequence[str] = (), divisor: int = 1) -> float:
        """Run once (under *wrap*, with the count divided by *divisor*) and return ns per operation."""
        argv = [*wrap, *self.command(max(1, self.count // divisor))]
        return self.parse(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)


def loop(binary: Path, name: str, mode: str, count: int) -> Workload:
    """A mode of bench/workloads/loops.c."""
    return Workload(name, lambda n: [str(binary), mode, str(n)], count)


def measure(configs: list[Config], workloads: list[Workload], repetitions: int) -> dict[str, dict[str, list[float]]]:
    """ns/op of every workload under every config, interleaved repetition by repetition."""
    results: dict[str, dict[str, list[float]]] = {c.name: {w.name: [] for w in workloads} for c in configs}
    for repetition in range(repetitions):
        for config in configs:
            background = config.start()
            try:
                for workload in workloads:
                    results[config.name][workload.name].append(workload.run(config.wrap, config.divisor))
            finally:
                if background:
                    background.stop()
            print(f"  repetition {repetition + 1}/{repetitions}: {config.name} done", file=sys.stderr, flush=True)
    return results


def report_table(
    medians: dict[str, dict[str, float]], baseline: str, floor: str, skip_ratio: Sequence[str] = ()
) -> list[str]:
    """Markdown rows: median ns/op (+ns over the baseline; x the floor's added ns)."""
    workloads = list(medians[baseline])
    lines = ["| configuration | " + " | ".join(workloads) + " |", "| --- |" + " --- |" * len(workloads)]
    for config, values in medians.items():
        cells = []
        for workload in workloads:
            value = values[workload]
            added = value - medians[baseline][workload]
            floor_added = medians[floor][workload] - medians[baseline][workload]
            cell = f"{value:,.0f}"
            if config != baseline:
                cell += f" (+{added:,.0f}"
                if config != floor and floor_added > 5 and workload not in skip_ratio:
                    cell += f"; {added / floor_added:.2f}x"
                cell += ")"
            cells.append(cell)
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    return lines


def program_costs(url: str) -> dict[str, tuple[float, float]]:
    """(runs, seconds) per BPF program from an agent's self-metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url, timeout=10).read().decode()
    runs: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = f"{sample.labels.get('collector')}/{sample.labels.get('program')}"
            if sample.name == "schedwatch_bpf_program_runs_total":
                runs[key] = sample.value
            elif sample.name == "schedwatch_bpf_program_run_seconds_total":
                seconds[key] = sample.value
    return {key: (runs[key], seconds[key]) for key in runs}


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Agent(Background):
    """schedwatch run on a free port, ready when /metrics answers."""

    def __init__(self, *flags: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/metrics"
        command = [python(), "-m", "agent", "run", "--listen", f"127.0.0.1:{port}", "--log-level", "warning", *flags]
        super().__init__(command, wait_for_http(self.url))


def per_event_ns(
    agent_flags: Sequence[str], workloads: Sequence[Workload], programs: Sequence[str]
) -> dict[str, float]:
    """ns per BPF program run by the kernel's accounting (--bpf-stats) while *workloads* run once each."""
    agent = Agent("--bpf-stats", *agent_flags)
    try:
        before = program_costs(agent.url)
        for workload in workloads:
            workload.run()
        time.sleep(0.2)
        after = program_costs(agent.url)
    finally:
        agent.stop()
    costs = {}
    for program in programs:
        runs = after[program][0] - before[program][0]
        costs[program] = (after[program][1] - before[program][1]) / runs * 1e9 if runs else float("nan")
    return costs


def median(values: list[float]) -> float:
    """The median."""
    return statistics.median(values)


def require(*tools: str) -> None:
    """Fail with the package to install when a peer tool is missing."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"bench: missing {', '.join(missing)}: run `sudo make bench` (scripts/setup.sh bench)")


def python() -> str:
    """The interpreter running the benchmark (the project's venv)."""
    return sys.executable


def environ(**extra: str) -> dict[str, str]:
    """This environment plus *extra*."""
    return {**os.environ, **extra}


def report_suite(result: dict[str, Any], skip_ratio: Sequence[str] = ()) -> str:
    """A suite's Markdown: the medians table against nothing attached and the floor, then per-event costs."""
    lines = [
        f"Median of {result['repetitions']} runs; ns per operation "
        "(added ns over nothing attached; x the floor's added ns)",
        "",
        *report_table(result["medians"], "nothing attached", "empty BPF programs (floor)", skip_ratio),
        "",
        "Kernel accounting (--bpf-stats), ns per program run, the accounting's own cost included:",
        "",
    ]
    for config, costs in result["per_event_ns"].items():
        lines.append(f"- {config}: " + ", ".join(f"`{program}` {ns:.0f} ns" for program, ns in costs.items()))
    return "\n".join(lines)
