"""Cost of placing processes on hosts without cgroup2: process creation with and without the fork and move probes.

Keyed by process, each program also runs on sched_process_fork (remembering the parent of each new task until its
first event) and on cgroup_attach_task (announcing moves with the new path), so that a process gone before the
agent reads its /proc entry is still placed. Workloads: fork + exit + wait of a child, and create + join of a
thread (the tracepoint cannot tell a thread from a process, so both pay). Configurations, interleaved: nothing;
the sched collector keyed by cgroup (no fork or move probes); the same keyed by process; every collector keyed by
process.
"""

from __future__ import annotations

from typing import Any

from bench.common import Agent, Config, build, loop, measure, median, per_event_ns, report_table, require

SCHED_ONLY = ("--no-collector.syscalls", "--no-collector.syscall_families", "--no-collector.cgroup_cpu")
BY_PROCESS = ("--workloads-by", "process")
PROGRAMS = ("sched/sched_process_fork", "syscalls/sched_process_fork")


def configs() -> list[Config]:
    """Every configuration compared, baseline first."""
    return [
        Config("nothing attached"),
        Config("schedwatch, sched collector, keyed by cgroup", start=lambda: Agent(*SCHED_ONLY)),
        Config("schedwatch, sched collector, keyed by process", start=lambda: Agent(*SCHED_ONLY, *BY_PROCESS)),
        Config("schedwatch, all collectors, keyed by process", start=lambda: Agent(*BY_PROCESS)),
    ]


def run(repetitions: int) -> dict[str, Any]:
    """Measure everything; return raw samples, medians and the kernel's per-event accounting."""
    require("gcc")
    binary = build("loops")
    workloads = [
        loop(binary, "fork + exit + wait", "fork", 5_000),
        loop(binary, "thread create + join", "thread", 10_000),
    ]
    samples = measure(configs(), workloads, repetitions)
    medians = {config: {w: median(v) for w, v in values.items()} for config, values in samples.items()}
    return {
        "repetitions": repetitions,
        "samples": samples,
        "medians": medians,
        "per_event_ns": {"schedwatch --workloads-by process": per_event_ns(BY_PROCESS, workloads, PROGRAMS)},
    }


def report(result: dict[str, Any]) -> str:
    """A Markdown table against nothing attached, and the fork probes' own cost."""
    medians = result["medians"]
    baseline = "nothing attached"
    lines = report_table(medians, baseline, baseline)
    lines.append("")
    for config, costs in result["per_event_ns"].items():
        cells = ", ".join(f"`{program}` {ns:,.0f}" for program, ns in costs.items())
        lines.append(f"Kernel accounting, ns per program run, {config}: {cells}.")
    return "\n".join(lines)
