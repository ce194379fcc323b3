"""Issue-2 benchmark: cost of schedwatch's syscall probes next to its peers, on three loops.

(a) a tight sched_yield loop, (b) a futex ping-pong between two threads on one CPU, (c) getppid, a syscall
schedwatch does not trace. Configurations, interleaved in one run: nothing attached; empty BPF programs on
schedwatch's tracepoints (the floor); schedwatch (default: per-cgroup + per-process accounting); schedwatch with
--process-top-k 0 (per-cgroup only); bcc's syscount; perf trace -s; strace -f -c.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import (
    BENCH,
    Background,
    Config,
    build,
    environ,
    measure,
    median,
    python,
    require,
    wait_for_http,
    wait_for_line,
)

WORKLOADS = {
    "sched_yield loop": ("yield", 2_000_000),
    "futex ping-pong": ("futex", 200_000),
    "getppid loop": ("getppid", 4_000_000),
}
PROGRAMS = ("sys_enter_sched_yield", "sys_enter_futex", "sys_exit_futex")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _agent(*flags: str) -> Background:
    port = _free_port()
    command = [python(), "-m", "agent", "run", "--listen", f"127.0.0.1:{port}", "--log-level", "warning", *flags]
    background = Background(command, wait_for_http(f"http://127.0.0.1:{port}/metrics"))
    background.url = f"http://127.0.0.1:{port}/metrics"  # type: ignore[attr-defined]
    return background


def _floor() -> Background:
    defines = ["-DHAVE_FUTEX2"] if Path("/sys/kernel/tracing/events/syscalls/sys_enter_futex_waitv").exists() else []
    return Background([python(), "-m", "bench.floor", str(BENCH / "empty.bpf.c"), *defines], wait_for_line("ready"))


def _syscount() -> Background:
    bcc_source = environ().get("BCC_KERNEL_SOURCE") or _merged_headers()
    return Background(["syscount-bpfcc"], wait_for_line("Tracing syscalls"), env=environ(BCC_KERNEL_SOURCE=bcc_source))


def _merged_headers() -> str:
    from agent import kernel

    choice = kernel.find_kernel_headers(kernel.kernel_release(), environ())
    prepared = kernel.prepare_headers(choice, Path("/run/schedwatch"))
    return str(prepared.bcc_kernel_source or "")


def configs() -> list[Config]:
    """Every configuration compared, baseline first."""
    return [
        Config("nothing attached"),
        Config("empty BPF programs (floor)", start=_floor),
        Config("schedwatch, syscalls collector", start=lambda: _agent("--no-collector.sched")),
        Config(
            "schedwatch, syscalls collector, --process-top-k 20",
            start=lambda: _agent("--no-collector.sched", "--process-top-k", "20"),
        ),
        Config("schedwatch, all collectors", start=lambda: _agent()),
        Config("syscount-bpfcc", start=_syscount),
        Config("perf trace -s", wrap=["perf", "trace", "-s", "-o", "/dev/null", "--"], divisor=20),
        Config("strace -f -c", wrap=["strace", "-f", "-c", "-o", "/dev/null"], divisor=50),
    ]


def per_event_cost(binary: Path, *flags: str) -> dict[str, float]:
    """ns per program run from the kernel's own accounting (schedwatch --bpf-stats), on loops (a) and (b)."""
    agent = _agent("--bpf-stats", *flags)
    try:
        before = _program_stats(agent.url)  # type: ignore[attr-defined]
        for mode, count in (("yield", 2_000_000), ("futex", 200_000)):
            subprocess.run([str(binary), mode, str(count)], capture_output=True, check=True)
        time.sleep(0.2)
        after = _program_stats(agent.url)  # type: ignore[attr-defined]
    finally:
        agent.stop()
    cost = {}
    for program in PROGRAMS:
        runs = after[program][0] - before[program][0]
        seconds = after[program][1] - before[program][1]
        cost[program] = seconds / runs * 1e9 if runs else float("nan")
    return cost


def _program_stats(url: str) -> dict[str, tuple[float, float]]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url, timeout=10).read().decode()
    runs: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "schedwatch_bpf_program_runs_total":
                runs[sample.labels["program"]] = sample.value
            elif sample.name == "schedwatch_bpf_program_run_seconds_total":
                seconds[sample.labels["program"]] = sample.value
    return {program: (runs[program], seconds[program]) for program in runs}


def run(repetitions: int) -> dict[str, Any]:
    """Measure everything; return raw samples, medians and derived overheads."""
    require("syscount-bpfcc", "perf", "strace", "gcc")
    binary = build("loops")
    workloads = {name: (binary, mode, count) for name, (mode, count) in WORKLOADS.items()}
    samples = measure(configs(), workloads, repetitions)
    medians = {config: {w: median(v) for w, v in values.items()} for config, values in samples.items()}
    return {
        "repetitions": repetitions,
        "samples": samples,
        "medians": medians,
        "per_event_ns": {
            "schedwatch": per_event_cost(binary, "--no-collector.sched"),
            "schedwatch --process-top-k 20": per_event_cost(binary, "--no-collector.sched", "--process-top-k", "20"),
        },
    }


def report(result: dict[str, Any]) -> str:
    """A Markdown table: median ns/op, overhead over nothing attached, overhead relative to the floor."""
    medians = result["medians"]
    base = medians["nothing attached"]
    floor = medians["empty BPF programs (floor)"]
    lines = [
        f"Median of {result['repetitions']} runs; ns per operation "
        "(added ns over nothing attached; x the floor's added ns)",
        "",
        "| configuration | " + " | ".join(WORKLOADS) + " |",
        "| --- |" + " --- |" * len(WORKLOADS),
    ]
    for config, values in medians.items():
        cells = []
        for workload in WORKLOADS:
            value = values[workload]
            added = value - base[workload]
            floor_added = floor[workload] - base[workload]
            cell = f"{value:,.0f}"
            if config != "nothing attached":
                cell += f" (+{added:,.0f}"
                if config != "empty BPF programs (floor)" and floor_added > 5 and workload != "getppid loop":
                    cell += f"; {added / floor_added:.2f}x"
                cell += ")"
            cells.append(cell)
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    lines += ["", "Kernel accounting (--bpf-stats), ns per program run, accounting's own cost included:", ""]
    for config, costs in result["per_event_ns"].items():
        lines.append(f"- {config}: " + ", ".join(f"`{program}` {ns:.0f} ns" for program, ns in costs.items()))
    return "\n".join(lines)
