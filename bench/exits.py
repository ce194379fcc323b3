"""Issue-26 benchmark: what counting processes that exit costs the families program, by the kernel's accounting.

`python -m bench exits [--repetitions N]`: the agent with only the syscall_families collector and `--bpf-stats`,
`bench/workloads/loops.c fork` (a child that exits at once, and the wait for it) 20,000 times, and run_time_ns /
run_cnt of the program on sched_process_exit: it ran at every thread's exit before (to drop a timed call's slot), and
now also counts the exit of a process's last thread in its workload (one more hash lookup and an add). Medians.
"""

from __future__ import annotations

from typing import Any

from agent.collectors import registry
from bench.common import build, loop, median, per_event_ns, require

PROGRAM = "syscall_families/sched_process_exit"
FORKS = 20_000


def families_only() -> tuple[str, ...]:
    """Flags turning off every collector but syscall_families (those this checkout has)."""
    return tuple(f"--no-collector.{name}" for name in registry() if name != "syscall_families")


def run(repetitions: int) -> dict[str, Any]:
    """ns per run of the exit program, every repetition."""
    require("gcc")
    workload = loop(build("loops"), f"fork and exit, {FORKS:,} processes", "fork", FORKS)
    samples = [per_event_ns(families_only(), [workload], (PROGRAM,))[PROGRAM] for _ in range(repetitions)]
    return {"repetitions": repetitions, "samples": samples}


def report(result: dict[str, Any]) -> str:
    """Median and every run, ns per run of the exit program."""
    runs = ", ".join(f"{value:.0f}" for value in result["samples"])
    return f"`{PROGRAM}`: {median(result['samples']):.0f} ns per run, median of {result['repetitions']} ({runs})"
