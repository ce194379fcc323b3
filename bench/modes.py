"""Issue-12 benchmark: what counting perf events per cgroup (perf mode) cost beside BPF mode and nothing attached.

Workloads: the sched_yield loop pinned to CPU 1, a futex ping-pong on one CPU (every round trip is two context
switches, where the kernel switches cgroup perf events in and out), and getppid, which neither mode counts.
Configurations, interleaved: nothing attached; empty BPF programs on the syscall tracepoints (the floor);
schedwatch's syscalls collector in bpf mode; the same collector in perf mode; perf mode with every collector
(the schedstat scan costs only at scrape time, reported apart); `perf stat -a` counting the same tracepoints
system-wide (the issue's measurement). Then the scrape cost of perf mode: each collector's duration over a few
scrapes, with the cgroups and threads this machine has.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import Agent, Background, Config, Workload, build, measure, median, report_table, require
from bench.syscalls import floor

SYSCALLS_ONLY = ("--no-collector.sched", "--no-collector.syscall_families", "--no-collector.cgroup_cpu")
SCRAPES = 5
EXTRA_CGROUPS = 500


def pinned_loop(binary: Path, name: str, mode: str, count: int) -> Workload:
    """A mode of bench/workloads/loops.c pinned to CPU 1."""
    return Workload(name, lambda n: ["taskset", "-c", "1", str(binary), mode, str(n)], count)


def perf_stat() -> Background:
    """perf stat counting the yield and futex tracepoints on every CPU, until stopped."""

    def ready(_process: subprocess.Popen[str]) -> None:
        time.sleep(1.0)  # perf opens its counters within a few ms

    events = ("-e", "syscalls:sys_enter_sched_yield", "-e", "syscalls:sys_enter_futex")
    return Background(["perf", "stat", "-a", *events, "-o", "/dev/null", "--", "sleep", "3600"], ready)


def configs() -> list[Config]:
    """Every configuration compared, baseline first."""
    return [
        Config("nothing attached"),
        Config("empty BPF programs (floor)", start=floor),
        Config("schedwatch --mode bpf, syscalls collector", start=lambda: Agent("--mode", "bpf", *SYSCALLS_ONLY)),
        Config("schedwatch --mode perf, syscalls collector", start=lambda: Agent("--mode", "perf", *SYSCALLS_ONLY)),
        Config("schedwatch --mode perf, all collectors", start=lambda: Agent("--mode", "perf")),
        Config("perf stat -a (yield and futex tracepoints)", start=perf_stat),
    ]


def scrape_cost(mode: str) -> dict[str, float]:
    """Median seconds each collector takes per scrape in *mode* (schedwatch_collector_duration_seconds)."""
    from prometheus_client.parser import text_string_to_metric_families

    agent = Agent("--mode", mode)
    durations: dict[str, list[float]] = {}
    counters = 0.0
    try:
        for _ in range(SCRAPES):
            text = urllib.request.urlopen(agent.url, timeout=30).read().decode()
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if sample.name == "schedwatch_collector_duration_seconds":
                        durations.setdefault(sample.labels["source"], []).append(sample.value)
                    elif sample.name == "schedwatch_perf_counters_open":
                        counters = sample.value
            time.sleep(0.5)
    finally:
        agent.stop()
    return {**{source: median(values) for source, values in durations.items()}, "perf_counters_open": counters}


def cgroup_count() -> int:
    """Directories in the cgroup2 tree now (each gets CPUs x events counters in perf mode)."""
    from agent.machine.cgroups.layout import read_layout

    root = read_layout().unified
    return sum(1 for _ in root.rglob("cgroup.procs")) if root else 0


@contextlib.contextmanager
def extra_cgroups(count: int) -> Iterator[None]:
    """*count* empty cgroups made for the measurement, removed after it."""
    from agent.machine.cgroups.layout import read_layout

    root = read_layout().unified
    assert root is not None, "no cgroup2 mount"
    base = root / f"schedwatch-bench-{os.getpid()}"
    base.mkdir()
    made = []
    try:
        for index in range(count):
            (base / f"c{index}").mkdir()
            made.append(base / f"c{index}")
        yield
    finally:
        for path in made:
            path.rmdir()
        base.rmdir()


def run(repetitions: int) -> dict[str, Any]:
    """Measure every configuration, then perf mode's scrape cost."""
    require("perf", "gcc", "taskset")
    binary = build("loops")
    workloads = [
        pinned_loop(binary, "sched_yield loop (pinned)", "yield", 2_000_000),
        pinned_loop(binary, "futex ping-pong", "futex", 200_000),
        pinned_loop(binary, "getppid loop (pinned)", "getppid", 4_000_000),
    ]
    samples = measure(configs(), workloads, repetitions)
    medians = {config: {w: median(v) for w, v in values.items()} for config, values in samples.items()}
    cgroups = cgroup_count()
    scrapes = {mode: scrape_cost(mode) for mode in ("bpf", "perf", "procfs")}
    with extra_cgroups(EXTRA_CGROUPS):
        crowded = {"cgroups": cgroup_count(), "perf": scrape_cost("perf")}
    return {
        "repetitions": repetitions,
        "samples": samples,
        "medians": medians,
        "cgroups": cgroups,
        "scrape": scrapes,
        "crowded": crowded,
    }


def report(result: dict[str, Any]) -> str:
    """The medians table, then the scrape cost per mode."""
    lines = [
        f"Median of {result['repetitions']} runs; ns per operation "
        "(added ns over nothing attached; x the floor's added ns)",
        "",
        *report_table(result["medians"], "nothing attached", "empty BPF programs (floor)", ["getppid loop (pinned)"]),
        "",
        f"Scrape cost, median of {SCRAPES} scrapes, with {result['cgroups']} cgroups on the machine "
        "(schedwatch_collector_duration_seconds, ms):",
        "",
    ]
    for mode, costs in result["scrape"].items():
        parts = [f"{name} {seconds * 1000:.1f}" for name, seconds in costs.items() if name != "perf_counters_open"]
        counters = f"; {costs['perf_counters_open']:.0f} perf counters open" if mode == "perf" else ""
        lines.append(f"- {mode}: " + ", ".join(parts) + counters)
    crowded = result["crowded"]
    costs = crowded["perf"]
    parts = [f"{name} {seconds * 1000:.1f}" for name, seconds in costs.items() if name != "perf_counters_open"]
    lines.append(
        f"- perf, with {crowded['cgroups']} cgroups ({EXTRA_CGROUPS} empty ones added): "
        + ", ".join(parts)
        + f"; {costs['perf_counters_open']:.0f} perf counters open"
    )
    return "\n".join(lines)
