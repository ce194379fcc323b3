"""Issue-35 benchmark: what the process lifecycle costs each process, by the kernel's accounting, per program.

`python -m bench exits [--repetitions N]`: the agent with the three programs that share the lifecycle of
bpf/schedwatch.h (syscalls, sched and, turned on, syscall_families), keyed by cgroup and keyed by process, and
`bench/workloads/loops.c fork` (a child that exits at once, and the wait for it) FORKS times; for each program its
sched_process_exit (and, keyed by process, sched_process_fork) run_time_ns / run_cnt, and their sum per process,
beside what a fork and its exit cost here without the agent (the loop's own ns per fork). A single lifecycle program
for all three would save at most that sum less one program's share.
"""

from __future__ import annotations

from typing import Any

from bench.common import build, loop, median, per_event_ns, require
from tests.support.agent import only_collectors

FORKS = 20_000
LIFECYCLE = ("syscalls", "sched", "syscall_families")
MODES = {"keyed by cgroup": (), "keyed by process": ("--workloads-by", "process")}


def programs(mode: str) -> tuple[str, ...]:
    """The lifecycle programs each collector runs per process in *mode*."""
    handlers = ("sched_process_exit", "sched_process_fork") if MODES[mode] else ("sched_process_exit",)
    return tuple(f"{collector}/{handler}" for collector in LIFECYCLE for handler in handlers)


def run(repetitions: int) -> dict[str, Any]:
    """ns per run of each lifecycle program, every repetition, and the fork loop's own ns per fork."""
    require("gcc")
    workload = loop(build("loops"), f"fork and exit, {FORKS:,} processes", "fork", FORKS)
    samples: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    bare = []
    for _ in range(repetitions):
        bare.append(workload.run())
        for mode, flags in MODES.items():
            costs = per_event_ns((*only_collectors(*LIFECYCLE), *flags), [workload], programs(mode))
            for program, ns in costs.items():
                samples[mode].setdefault(program, []).append(ns)
    return {"repetitions": repetitions, "samples": samples, "fork_ns": bare}


def report(result: dict[str, Any]) -> str:
    """Per program, the median and every run; the sum per process beside the cost of a fork and its exit."""
    fork = median(result["fork_ns"])
    lines = [
        f"ns per run, median of {result['repetitions']} (every run in brackets); a fork + exit + wait without the "
        f"agent: {fork:,.0f} ns",
        "",
    ]
    for mode, by_program in result["samples"].items():
        total = sum(median(values) for values in by_program.values())
        for program, values in by_program.items():
            runs = ", ".join(f"{value:.0f}" for value in values)
            lines.append(f"- {mode}: `{program}` {median(values):.0f} ns ({runs})")
        lines.append(
            f"- {mode}: all lifecycle programs together {total:,.0f} ns per process ({100 * total / fork:.2f} %)"
        )
    return "\n".join(lines)
