"""Benchmark plumbing: build workloads, start tracers side by side, take medians."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class Config:
    """One way of watching the workloads: nothing, a system-wide tracer, or a wrapper command."""

    name: str
    start: Callable[[], Background | None] = lambda: None
    wrap: list[str] = field(default_factory=list)
    divisor: int = 1  # slow tracers run fewer operations (the result is per operation)


def run_workload(command: Sequence[str]) -> float:
    """Run one workload and return its ns per operation."""
    output = subprocess.run(list(command), check=True, capture_output=True, text=True).stdout
    line = [ln for ln in output.splitlines() if ln.startswith("{")][-1]
    return float(json.loads(line)["ns_per_op"])


def measure(
    configs: list[Config], workloads: dict[str, tuple[Path, str, int]], repetitions: int
) -> dict[str, dict[str, list[float]]]:
    """ns/op of every workload under every config, interleaved repetition by repetition."""
    results: dict[str, dict[str, list[float]]] = {c.name: {w: [] for w in workloads} for c in configs}
    for repetition in range(repetitions):
        for config in configs:
            background = config.start()
            try:
                for name, (binary, mode, count) in workloads.items():
                    command = [*config.wrap, str(binary), mode, str(max(1, count // config.divisor))]
                    results[config.name][name].append(run_workload(command))
            finally:
                if background:
                    background.stop()
            print(f"  repetition {repetition + 1}/{repetitions}: {config.name} done", file=sys.stderr, flush=True)
    return results


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
