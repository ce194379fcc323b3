"""`python -m bench.memory [--runs N] [--workloads N]`: the agent's resident memory, idle or with N workloads.

Starts `schedwatch run` (as root), waits until /metrics answers, scrapes it every few seconds and samples VmRSS,
RssAnon and RssFile of the agent (and of any process it left running) from /proc/PID/status at 30 s and 60 s.
With --workloads N it first makes N cgroups, each holding a `yielder` process (tests/workloads/yielder.c), so the
agent has N workloads to label and export. Prints one JSON line per run, the medians, and the largest resident
size any one process of the agent's reached (getrusage of the waited-for children: the agent, and the loader
children it waited for, whose compile is the peak the container's memory limit must also hold).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
import urllib.request
from pathlib import Path

from agent.machine.cgroups.layout import read_layout
from bench.common import Agent
from tests.support.workloads import CgroupSandbox, Workload, build

SAMPLE_AT = (30.0, 60.0)
SCRAPE_EVERY = 10.0
FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


def status_kb(pid: int) -> dict[str, int]:
    """The memory fields of /proc/PID/status, in kB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in FIELDS:
            found[name] = int(value.split()[0])
    return found


def descendants(pid: int) -> list[int]:
    """Processes whose parent is *pid* (a loader the agent left behind would show here)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in children.read_text().split()] if children.exists() else []


def one_run(flags: list[str]) -> dict[str, object]:
    """Start the agent, scrape it, sample its memory at SAMPLE_AT seconds after /metrics first answered."""
    agent = Agent(*flags)
    try:
        started = time.monotonic()
        samples: dict[str, dict[str, int]] = {}
        next_scrape = started
        series = 0
        for at in SAMPLE_AT:
            while time.monotonic() < started + at:
                if time.monotonic() >= next_scrape:
                    body = urllib.request.urlopen(agent.url, timeout=30).read()
                    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
                    next_scrape += SCRAPE_EVERY
                time.sleep(0.2)
            samples[f"{at:.0f}s"] = status_kb(agent.process.pid)
        # What else ran on the host shows here: each cgroup is a workload the agent labels and exports.
        root = read_layout().unified
        cgroups = sum(1 for _ in root.rglob("cgroup.procs")) if root else 0
        return {"samples": samples, "series": series, "cgroups": cgroups, "children": descendants(agent.process.pid)}
    finally:
        agent.stop()


def main() -> None:
    """Run the agent --runs times and print each run's samples, then the medians in MB."""
    parser = argparse.ArgumentParser(prog="python -m bench.memory")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workloads", type=int, default=0, help="cgroups, each with one held yielder process")
    parser.add_argument("agent_flags", nargs="*", help="extra flags for `schedwatch run` (after --)")
    args = parser.parse_args()
    sandbox = CgroupSandbox() if args.workloads else None
    held: list[Workload] = []
    try:
        if sandbox is not None:
            yielder = build("yielder")
            held = [Workload(yielder, sandbox.make(f"mem{index}"), 10, 1) for index in range(args.workloads)]
        runs = []
        for _ in range(args.runs):
            result = one_run(args.agent_flags)
            print(json.dumps(result), flush=True)
            runs.append(result)
        for at in SAMPLE_AT:
            key = f"{at:.0f}s"
            medians = {
                name: statistics.median(run["samples"][key][name] for run in runs) / 1024  # type: ignore[index]
                for name in FIELDS
            }
            print(f"{key}: " + ", ".join(f"{name} {value:.1f} MB" for name, value in medians.items()))
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"largest peak of one process (agent or its loader children): {peak:.1f} MB")
    finally:
        for workload in held:
            workload.release()
        if sandbox is not None:
            sandbox.cleanup()


if __name__ == "__main__":
    main()
