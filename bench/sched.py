"""Issue-3 benchmark: cost of schedwatch's scheduler probes next to bcc's runqlat and a bpftrace equivalent.

Workloads, all context-switch bound: `perf bench sched pipe` on one CPU (two processes, a pipe round trip each
operation) and a ring of 16 threads passing a token with futex wake-ups across every CPU (a wake-up storm).
Configurations, interleaved: nothing; empty programs on sched_switch, sched_wakeup, sched_wakeup_new and
sched_process_exit (the floor); schedwatch's sched collector alone; schedwatch with every collector;
runqlat-bpfcc; a bpftrace script doing run-queue latency and off-CPU time on the same tracepoints
(offcputime-bpfcc needs kprobes, which this kernel does not have).
"""

from __future__ import annotations

from typing import Any

from bench.common import (
    BENCH,
    Agent,
    Background,
    Config,
    Workload,
    build,
    loop,
    measure,
    median,
    per_event_ns,
    python,
    report_suite,
    require,
    wait_for_line,
)
from bench.syscalls import bcc_tool

PROGRAMS = ("sched/sched_switch", "sched/sched_wakeup", "sched/sched_wakeup_new")
SCHED_ONLY = ("--no-collector.syscalls", "--no-collector.syscall_families", "--no-collector.cgroup_cpu")


def pipe_workload() -> Workload:
    """perf bench sched pipe pinned to CPU 0, in ns per round trip."""
    return Workload(
        "perf bench sched pipe (1 CPU)",
        lambda n: ["taskset", "-c", "0", "perf", "bench", "sched", "pipe", "-l", str(n)],
        200_000,
        parse=lambda output: 1000 * float(next(ln for ln in output.splitlines() if "usecs/op" in ln).split()[0]),
    )


def configs() -> list[Config]:
    """Every configuration compared, baseline first."""
    return [
        Config("nothing attached"),
        Config(
            "empty BPF programs (floor)",
            start=lambda: Background(
                [python(), "-m", "bench.floor", str(BENCH / "empty_sched.bpf.c")], wait_for_line("ready")
            ),
        ),
        Config("schedwatch, sched collector", start=lambda: Agent(*SCHED_ONLY)),
        Config(
            "schedwatch, sched collector, keyed by process (hosts without cgroup2)",
            start=lambda: Agent(*SCHED_ONLY, "--workloads-by", "process"),
        ),
        Config("schedwatch, all collectors", start=lambda: Agent()),
        Config("runqlat-bpfcc", start=lambda: bcc_tool("runqlat-bpfcc", ready="Tracing run queue latency")),
        Config(
            "bpftrace run-queue + off-CPU script",
            start=lambda: Background(["bpftrace", str(BENCH / "peers" / "runq_offcpu.bt")], wait_for_line("Tracing")),
        ),
    ]


def run(repetitions: int) -> dict[str, Any]:
    """Measure everything; return raw samples, medians and the kernel's per-event accounting."""
    require("runqlat-bpfcc", "bpftrace", "perf", "taskset", "gcc")
    binary = build("loops")
    workloads = [pipe_workload(), loop(binary, "futex ring, 16 threads", "ring", 100_000)]
    samples = measure(configs(), workloads, repetitions)
    medians = {config: {w: median(v) for w, v in values.items()} for config, values in samples.items()}
    return {
        "repetitions": repetitions,
        "samples": samples,
        "medians": medians,
        "per_event_ns": {
            "schedwatch": per_event_ns(SCHED_ONLY, workloads, PROGRAMS),
            "schedwatch --workloads-by process": per_event_ns(
                (*SCHED_ONLY, "--workloads-by", "process"), workloads, PROGRAMS
            ),
        },
    }


def report(result: dict[str, Any]) -> str:
    """A Markdown table and the per-event costs."""
    return report_suite(result, skip_ratio=())
