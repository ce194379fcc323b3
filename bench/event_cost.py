"""Issue-33 benchmark: the per-event goals, as ratios measured in one run by the kernel's accounting (bpf_stats).

`python -m bench event_cost [--repetitions N]`, each repetition measuring, in turn:

- `sched_switch`: the agent's sched collector alone while `perf bench sched pipe` runs pinned to CPU 0, against
  empty programs and programs that only read the clock on the same tracepoints (bench/switch_cost.py's floors):
  the goal is at most 1.5x the clock-only floor;
- the call-site count: the syscalls program on sched_yield with call sites counted and not (--code-workloads 0)
  while a pinned loop makes 2,000,000 yields: the goal is at most 50 ns added per yield;
- a timed system call: the syscall_families program's sys_enter + sys_exit with the measured workload timed, and
  with another timed (bench/families.py), against raw_syscalls programs that only read the clock: the goal is at
  most 1.5x that floor, or the timing gated (the default times only the busiest workloads, and the collector is off
  by default).
"""

from __future__ import annotations

from typing import Any

from bench import families, switch_cost
from bench.attribution import yield_site_ns
from bench.common import build, median, per_event_ns, require
from bench.sched import SCHED_ONLY, pipe_workload

SWITCH = "sched/sched_switch"
SWITCH_FLOORS = {"empty": "empty_sched.bpf.c", "clock": "clock_sched.bpf.c"}
TIMED = {"this workload timed": "measured", "another workload timed": "other"}


def run(repetitions: int) -> dict[str, Any]:
    """Every measurement, every repetition, interleaved."""
    require("perf", "taskset", "gcc", "bpftool")
    binary = build("loops")
    pipe = pipe_workload()
    samples: dict[str, list[float]] = {}

    def keep(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    root = families.cgroup_root()
    groups = {name: root / f"schedwatch-bench-event-{name}" for name in ("measured", "other")}
    for group in groups.values():
        group.mkdir(exist_ok=True)
    getppid = families.getppid_loop(binary, groups["measured"])
    try:
        for _ in range(repetitions):
            keep("sched_switch", per_event_ns(SCHED_ONLY, [pipe], (SWITCH,))[SWITCH])
            for floor, source in SWITCH_FLOORS.items():
                keep(f"sched_switch {floor} floor", switch_cost.floor_ns([pipe], source)[SWITCH])
            keep("sched_yield, call sites not counted", yield_site_ns("--code-workloads", "0"))
            keep("sched_yield, call sites counted", yield_site_ns())
            for label, timed in TIMED.items():
                costs = families.agent_ns(binary, groups, getppid, timed=timed)
                keep(f"system call, {label}", sum(costs.values()))
            for label, source in (
                ("empty", families.FLOORS[families.EMPTY_FLOOR]),
                ("clock", "clock_raw_syscalls.bpf.c"),
            ):
                keep(f"system call {label} floor", sum(families.floor_ns(source, getppid).values()))
    finally:
        for group in groups.values():
            group.rmdir()
    return {"repetitions": repetitions, "samples": samples}


def report(result: dict[str, Any]) -> str:
    """The medians (every run in brackets) and the three ratios."""
    samples = result["samples"]
    at = {name: median(values) for name, values in samples.items()}
    lines = [
        f"Kernel accounting (bpf_stats), ns per program run, median of {result['repetitions']} (every run in "
        "brackets; a system call is its sys_enter and sys_exit together):",
        "",
        "| measured | ns |",
        "| --- | --- |",
    ]
    for name, values in samples.items():
        lines.append(f"| {name} | {at[name]:.0f} ({', '.join(f'{value:.0f}' for value in values)}) |")
    site = at["sched_yield, call sites counted"] - at["sched_yield, call sites not counted"]
    switch = at["sched_switch"] / at["sched_switch clock floor"]
    lines += [
        "",
        f"- `sched_switch`: {switch:.2f}x the clock-only floor (goal 1.5x)",
        f"- the call-site count: {site:+.0f} ns per yield (goal 50)",
        f"- a timed system call: {at['system call, this workload timed'] / at['system call clock floor']:.2f}x the "
        "clock-only floor (goal 1.5x, or gated); a call of an untimed workload while others are timed: "
        f"{at['system call, another workload timed'] / at['system call clock floor']:.2f}x",
    ]
    return "\n".join(lines)
