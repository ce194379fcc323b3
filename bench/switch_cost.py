"""Issue-13 benchmark: what one run of the sched programs costs, by the kernel's accounting (bpf_stats).

Each repetition starts the agent with only the sched collector and `--bpf-stats`, runs `perf bench sched pipe`
pinned to CPU 0 and the 16-thread futex ring, and reads run_time_ns / run_cnt of each program from the agent's
self-metrics; then the same for empty programs on the same tracepoints (the floor: the tracepoint's and the
accounting's own cost), and for programs that only read the clock (the floor of any program that timestamps).
Wall-clock time is not compared: on this shared VM it moves far more than the programs cost.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.machine.cgroups.layout import read_layout
from bench.common import BENCH, build, loop, median, per_event_ns, require
from bench.sched import PROGRAMS, SCHED_ONLY, pipe_workload

FLOORS = {
    "empty programs (floor)": "empty_sched.bpf.c",
    "clock read only (floor of a timestamping program)": "clock_sched.bpf.c",
}


def floor_ns(workloads: list[Any], source: str) -> dict[str, float]:
    """ns per run of the floor programs in *source* on the sched tracepoints, by the same accounting."""
    from agent.bpf.compile import import_bcc
    from agent.bpf.stats import enable_bpf_stats, program_stats
    from agent.machine import kernel

    kernel.prepare_headers(kernel.find_kernel_headers(kernel.kernel_release(), os.environ), Path("/run/schedwatch"))
    stats_fd = enable_bpf_stats()
    program = import_bcc().BPF(src_file=str(BENCH / source).encode())
    fds = {name.decode(): function.fd for name, function in program.funcs.items()}
    try:
        before = {s.program: s for s in program_stats(fds)}
        for workload in workloads:
            workload.run()
        time.sleep(0.2)
        after = {s.program: s for s in program_stats(fds)}
    finally:
        program.cleanup()
        os.close(stats_fd)
    costs = {}
    for name in PROGRAMS:
        short = name.split("/")[1]
        runs = after[short].runs - before[short].runs
        costs[name] = (after[short].run_seconds - before[short].run_seconds) / runs * 1e9 if runs else float("nan")
    return costs


@contextlib.contextmanager
def another_workload() -> Iterator[Path]:
    """A cgroup2 directory for the far end of the pipe2 workload (a workload of its own), removed at the end."""
    unified = read_layout().unified
    if unified is None:
        raise SystemExit("no cgroup2 mount: mount -t cgroup2 none /sys/fs/cgroup/unified")
    directory = unified / f"schedwatch-bench-{os.getpid()}"
    directory.mkdir()
    try:
        yield directory
    finally:
        for _ in range(100):  # the child has exited; its cgroup empties a moment later
            try:
                directory.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def run(repetitions: int) -> dict[str, Any]:
    """Per-event ns of each program, every repetition, for schedwatch and for both floors. The workloads: perf's pipe
    (both ends in one workload), the futex ring, and a pipe between two workloads on one CPU, whose every wait for
    the CPU is held by the other workload (the neighbours split's path, at every switch); that last one is measured
    alone too, for sched_switch."""
    require("perf", "taskset", "gcc")
    binary = build("loops")
    workloads = [
        pipe_workload(),
        loop(binary, "futex ring, 16 threads", "ring", 100_000),
        loop(binary, "pipe between two workloads (1 CPU)", "pipe2", 100_000),
    ]
    samples: dict[str, dict[str, list[float]]] = {"schedwatch": {}, **{floor: {} for floor in FLOORS}}
    crossing = workloads[-1]
    alone = f"schedwatch, {crossing.name} alone"
    samples[alone] = {}
    with another_workload() as directory:
        os.environ["LOOPS_CHILD_CGROUP"] = str(directory)
        for _ in range(repetitions):
            for config, costs in (
                ("schedwatch", per_event_ns(SCHED_ONLY, workloads, PROGRAMS)),
                (alone, per_event_ns(SCHED_ONLY, [crossing], PROGRAMS[:1])),
                *((floor, floor_ns(workloads, source)) for floor, source in FLOORS.items()),
            ):
                for program, ns in costs.items():
                    samples[config].setdefault(program, []).append(ns)
    return {"repetitions": repetitions, "samples": samples}


def report(result: dict[str, Any]) -> str:
    """Median and every run, ns per program run."""
    lines = [
        f"Kernel accounting (--bpf-stats), ns per program run, median of {result['repetitions']} "
        "(every run in brackets):",
        "",
    ]
    for config, programs in result["samples"].items():
        for program, values in programs.items():
            runs = ", ".join(f"{v:.0f}" for v in values)
            lines.append(f"- {config}: `{program}` {median(values):.0f} ns ({runs})")
    return "\n".join(lines)
