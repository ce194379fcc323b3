"""Issue-24 benchmark: what code attribution costs, and whether its answer agrees with perf's on the same run.

`python -m bench attribution [--repetitions N]`, as root, four parts in one run:

1. Sampling at the default 49 Hz on both CPUs while two busy loops keep both CPUs running user code (every timer
   tick then samples a thread): the agent's CPU (all its threads, cgroup2 usage_usec) per second with the oncpu
   collector on and off, interleaved, and the kernel's time in the sampling program (--bpf-stats: run time / runs,
   times the samples per second), which the interrupted threads pay.
2. A thousand workloads (cgroups), each a process spinning 1 ms a second in one function (half of both CPUs
   together): the agent's CPU per
   scrape interval (scrapes 10 s apart, its 1 s reads between them included) with code attribution on and off.
3. The yield-site count: ns per run of the syscalls program's sys_enter_sched_yield (kernel accounting) while a pinned
   loop makes 2,000,000 sched_yield calls, with call sites counted and not (--code-workloads 0).
4. The peer: a numpy 2.x pool (4 workers, OpenBLAS threads unset) in a cgroup for 10 s, recorded at the same time by
   `perf record -F 49 -a -G CGROUP` (then `perf report --sort dso,sym`) and by `schedwatch profile --cgroup`: each
   library's and function's share of the samples side by side.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import BENCH, REPO, Agent, build, median, program_costs, require
from bench.scrape import CpuMeter
from tests.scenarios.catalog import numpy_target
from tests.support.agent import only_collectors
from tests.support.workloads import CgroupSandbox

ONLY_CODE = tuple(only_collectors("syscalls", "oncpu"))  # the code attribution: call sites and samples
SITES_ONLY = tuple(only_collectors("syscalls"))
SITE_PROGRAM = "syscalls/sys_enter_sched_yield"
WINDOW = 20.0  # seconds of agent CPU per measurement of part 1
WORKLOADS = 1_000
SCRAPE_INTERVAL = 10.0
SCRAPES = 4
YIELDS = 2_000_000
PEER_SECONDS = 10
PEER_ROWS = 8


def agent_cpu_rate(sandbox: CgroupSandbox, name: str, *flags: str) -> dict[str, float]:
    """Agent CPU seconds per second over WINDOW (one scrape at its start and end), and its sampling program's
    kernel time per second."""
    agent = Agent("--bpf-stats", *flags)
    try:
        meter = CpuMeter(sandbox, name, agent.process.pid)
        time.sleep(3)  # loaded, first reads done
        urllib.request.urlopen(agent.url, timeout=30).read()
        before_costs, began, cpu = program_costs(agent.url), time.monotonic(), meter.seconds()
        time.sleep(WINDOW)
        after_costs = program_costs(agent.url)
        elapsed, used = time.monotonic() - began, meter.seconds() - cpu
    finally:
        agent.stop()
    program = "oncpu/on_cpu_sample"
    result = {"agent_cpu_per_second": used / elapsed}
    if program in after_costs:
        runs = after_costs[program][0] - before_costs[program][0]
        seconds = after_costs[program][1] - before_costs[program][1]
        result.update(samples_per_second=runs / elapsed, kernel_ns_per_sample=1e9 * seconds / max(runs, 1))
        result["kernel_cpu_per_second"] = seconds / elapsed
    return result


def part_sampling(sandbox: CgroupSandbox, repetitions: int) -> dict[str, Any]:
    spinners = [subprocess.Popen(["taskset", "-c", str(cpu), "sh", "-c", "while :; do :; done"]) for cpu in (0, 1)]
    try:
        runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        for index in range(repetitions):
            runs["off"].append(agent_cpu_rate(sandbox, f"off-{index}", *SITES_ONLY))
            runs["on"].append(agent_cpu_rate(sandbox, f"on-{index}", *ONLY_CODE))
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    return runs


def part_thousand(sandbox: CgroupSandbox, repetitions: int) -> dict[str, Any]:
    burst = build("burst")
    groups = [sandbox.make(f"burst{index}") for index in range(WORKLOADS)]
    processes = [subprocess.Popen([str(burst), str(group / "cgroup.procs"), "1"]) for group in groups]
    try:
        runs: dict[str, list[float]] = {"off": [], "on": []}
        for index in range(repetitions):
            for label, flags in (("off", ("--no-collector.oncpu", "--code-workloads", "0")), ("on", ())):
                agent = Agent(*flags)
                try:
                    meter = CpuMeter(sandbox, f"thousand-{label}-{index}", agent.process.pid)
                    urllib.request.urlopen(agent.url, timeout=60).read()
                    time.sleep(SCRAPE_INTERVAL)
                    urllib.request.urlopen(agent.url, timeout=60).read()  # names and caches are warm from here
                    cpu = meter.seconds()
                    text = ""
                    for _ in range(SCRAPES):
                        time.sleep(SCRAPE_INTERVAL)
                        text = urllib.request.urlopen(agent.url, timeout=60).read().decode()
                    runs[label].append(1000 * (meter.seconds() - cpu) / SCRAPES)
                    if label == "on":
                        named = {
                            m
                            for m in re.findall(r'schedwatch_cpu_samples_total\{[^}]*cgroup="([^"]*burst[^"]*)"', text)
                        }
                        runs.setdefault("workloads_with_samples", []).append(float(len(named)))
                finally:
                    agent.stop()
    finally:
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()
    return runs


def yield_site_ns(*flags: str) -> float:
    """ns per run of the syscalls program on sched_yield (kernel accounting), the agent counting yields alone, while a
    loop pinned to CPU 1 makes YIELDS calls."""
    agent = Agent("--bpf-stats", *SITES_ONLY, *flags)
    try:
        before = program_costs(agent.url)[SITE_PROGRAM]
        subprocess.run(
            ["taskset", "-c", "1", str(build("loops")), "yield", str(YIELDS)], check=True, capture_output=True
        )
        after = program_costs(agent.url)[SITE_PROGRAM]
    finally:
        agent.stop()
    return 1e9 * (after[1] - before[1]) / (after[0] - before[0])


def part_yield_sites(repetitions: int) -> dict[str, Any]:
    runs: dict[str, list[float]] = {"sites": [], "no sites": []}
    for _ in range(repetitions):
        for label, flags in (("no sites", ("--code-workloads", "0")), ("sites", ())):
            runs[label].append(yield_site_ns(*flags))
    return runs


def perf_shares(report: str) -> dict[tuple[str, str], float]:
    """(library, function) -> percent of `perf report --stdio --sort dso,sym` lines."""
    from agent.symbols.names import KERNEL, library_name

    shares: dict[tuple[str, str], float] = {}
    for line in report.splitlines():
        match = re.match(r"^\s+([\d.]+)%\s+(\S+)\s+\[([.k])\]\s+(.+?)\s*$", line)
        if not match:
            continue
        percent, dso, kind, symbol = float(match.group(1)), match.group(2), match.group(3), match.group(4)
        library = KERNEL if kind == "k" or dso.startswith("[kernel") else library_name(dso)
        function = "(unknown)" if symbol.startswith("0x") else symbol
        shares[(library, function)] = shares.get((library, function), 0.0) + percent
    return shares


def part_peer() -> dict[str, Any]:
    require("perf")
    sandbox = CgroupSandbox()
    group = sandbox.make("peer")
    relative = sandbox.relative(group).lstrip("/")
    work = tempfile.mkdtemp(prefix="bench-attribution-")
    data = Path(work) / "perf.data"
    env = {**os.environ, "PYTHONPATH": str(numpy_target("2"))}
    pool = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "workloads" / "numpy_pool.py"), str(group), "4", "unset", "40s", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(4)  # the pool's workers started and busy
        perf = subprocess.Popen(
            # -e before -G: perf attaches the cgroup to the events named before it (the same cpu-clock event)
            [
                "perf",
                "record",
                "-e",
                "cpu-clock",
                "-F",
                "49",
                "-a",
                "-G",
                relative,
                "-o",
                str(data),
                "--",
                "sleep",
                str(PEER_SECONDS),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        profile = subprocess.run(
            [
                sys.executable,
                "-m",
                "agent",
                "profile",
                "--cgroup",
                f"/{relative}",
                "--duration",
                str(PEER_SECONDS),
                "--json",
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        perf.wait()
    finally:
        pool.kill()
        pool.wait()
        sandbox.cleanup()
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--sort", "dso,sym", "--no-children"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ours: dict[tuple[str, str], float] = {}
    document = json.loads(profile.stdout)
    total = document["samples"]
    for workload in document["workloads"]:
        for row in workload["rows"]:
            key = (row["library"], row["function"])
            ours[key] = ours.get(key, 0.0) + 100 * row["samples"] / total
    theirs = perf_shares(report)
    perf_total = int(re.search(r"# Samples: (\d+)", report).group(1)) if re.search(r"# Samples: (\d+)", report) else 0
    return {"schedwatch": ours, "perf": theirs, "schedwatch_samples": total, "perf_samples": perf_total}


def run(repetitions: int) -> dict[str, Any]:
    """Every part; raw samples and medians."""
    require("taskset", "perf")
    partial = BENCH / "results" / "attribution-partial.json"
    partial.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    sandbox = CgroupSandbox()
    try:
        for name, part in (
            ("sampling", lambda: part_sampling(sandbox, repetitions)),
            ("yield_sites", lambda: part_yield_sites(repetitions)),
            ("thousand", lambda: part_thousand(sandbox, max(1, repetitions // 2))),
        ):
            result[name] = part()
            partial.write_text(json.dumps(result, indent=2))  # a later part's failure keeps what was measured
    finally:
        sandbox.cleanup()
    peer = part_peer()
    result["peer"] = {
        "schedwatch": {" ".join(key): value for key, value in peer["schedwatch"].items()},
        "perf": {" ".join(key): value for key, value in peer["perf"].items()},
        "schedwatch_samples": peer["schedwatch_samples"],
        "perf_samples": peer["perf_samples"],
    }
    return result


def _by_library(rows: dict[str, float]) -> dict[str, float]:
    libraries: dict[str, float] = {}
    for key, value in rows.items():
        library = key.split(" ", 1)[0]
        libraries[library] = libraries.get(library, 0.0) + value
    return libraries


def report(result: dict[str, Any]) -> str:
    """Markdown tables of the medians."""
    sampling = result["sampling"]
    off = median([run["agent_cpu_per_second"] for run in sampling["off"]])
    on = median([run["agent_cpu_per_second"] for run in sampling["on"]])
    kernel = median([run.get("kernel_cpu_per_second", 0.0) for run in sampling["on"]])
    per_sample = median([run.get("kernel_ns_per_sample", 0.0) for run in sampling["on"]])
    rate = median([run.get("samples_per_second", 0.0) for run in sampling["on"]])
    lines = [
        "| sampling at 49 Hz on 2 busy CPUs | agent CPU (% of a CPU) | kernel, sampling program (% of a CPU) |",
        "| --- | --- | --- |",
        f"| oncpu collector off | {100 * off:.3f} | |",
        f"| oncpu collector on | {100 * on:.3f} | {100 * kernel:.4f} ({per_sample:.0f} ns x {rate:.1f} samples/s) |",
        f"| cost of sampling | {100 * (on - off):.3f} | |",
        "",
        "| 1,000 workloads, scrapes 10 s apart | agent CPU per scrape interval (ms) |",
        "| --- | --- |",
    ]
    thousand = result["thousand"]
    lines.append(f"| code attribution off | {median(thousand['off']):.1f} |")
    lines.append(f"| code attribution on | {median(thousand['on']):.1f} |")
    lines.append(f"| difference | {median(thousand['on']) - median(thousand['off']):.1f} |")
    if thousand.get("workloads_with_samples"):
        lines.append(f"| workloads with sample rows (of 1,000) | {median(thousand['workloads_with_samples']):.0f} |")
    sites = result["yield_sites"]
    lines += [
        "",
        "| syscalls sys_enter_sched_yield, 2,000,000 pinned sched_yield | ns per run (kernel accounting) |",
        "| --- | --- |",
        f"| call sites not counted (--code-workloads 0) | {median(sites['no sites']):.1f} |",
        f"| call sites counted | {median(sites['sites']):.1f} |",
        f"| the call-site count | {median(sites['sites']) - median(sites['no sites']):.1f} |",
    ]
    peer = result["peer"]
    ours, theirs = _by_library(peer["schedwatch"]), _by_library(peer["perf"])
    lines += [
        "",
        f"| library (numpy 2.x pool, 10 s, 49 Hz) | schedwatch profile ({peer['schedwatch_samples']} samples) "
        f"| perf record -F 49 -a -G ({peer['perf_samples']} samples) |",
        "| --- | --- | --- |",
    ]
    for library in sorted(set(ours) | set(theirs), key=lambda name: -max(ours.get(name, 0), theirs.get(name, 0)))[
        :PEER_ROWS
    ]:
        lines.append(f"| {library} | {ours.get(library, 0.0):.1f} % | {theirs.get(library, 0.0):.1f} % |")
    lines += ["", "| function | schedwatch | perf |", "| --- | --- | --- |"]
    for key in sorted(
        set(peer["schedwatch"]) | set(peer["perf"]),
        key=lambda name: -max(peer["schedwatch"].get(name, 0), peer["perf"].get(name, 0)),
    )[:PEER_ROWS]:
        lines.append(f"| {key} | {peer['schedwatch'].get(key, 0.0):.1f} % | {peer['perf'].get(key, 0.0):.1f} % |")
    return "\n".join(lines)
