"""Issue-2 benchmark: cost of schedwatch's syscall probes next to its peers, on three loops.

(a) a tight sched_yield loop, (b) a futex ping-pong between two threads on one CPU, (c) getppid, a syscall
schedwatch does not trace. Configurations, interleaved in one run: nothing attached; empty BPF programs on
schedwatch's tracepoints (the floor); schedwatch's syscalls collector (default, and with per-process accounting);
schedwatch with every collector; bcc's syscount; perf trace -s; strace -f -c.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import (
    BENCH,
    Agent,
    Background,
    Config,
    build,
    environ,
    loop,
    measure,
    median,
    per_event_ns,
    python,
    report_suite,
    require,
    wait_for_line,
)

PROGRAMS = ("syscalls/sys_enter_sched_yield", "syscalls/sys_enter_futex", "syscalls/sys_exit_futex")
SYSCALLS_ONLY = ("--no-collector.sched", "--no-collector.syscall_families", "--no-collector.cgroup_cpu")


def floor() -> Background:
    """Empty programs on the syscalls probe's tracepoints."""
    defines = ["-DHAVE_FUTEX2"] if Path("/sys/kernel/tracing/events/syscalls/sys_enter_futex_waitv").exists() else []
    return Background([python(), "-m", "bench.floor", str(BENCH / "empty.bpf.c"), *defines], wait_for_line("ready"))


def bcc_tool(*command: str, ready: str) -> Background:
    """A bcc tool, given the same kernel headers the agent found."""
    return Background(list(command), wait_for_line(ready), env=environ(BCC_KERNEL_SOURCE=merged_headers()))


def merged_headers() -> str:
    """BCC_KERNEL_SOURCE for peers: the agent's choice of headers, prepared the same way."""
    from agent.machine import kernel

    choice = kernel.find_kernel_headers(kernel.kernel_release(), environ())
    prepared = kernel.prepare_headers(choice, Path("/run/schedwatch"))
    return str(prepared.bcc_kernel_source or environ().get("BCC_KERNEL_SOURCE", ""))


def configs() -> list[Config]:
    """Every configuration compared, baseline first."""
    return [
        Config("nothing attached"),
        Config("empty BPF programs (floor)", start=floor),
        Config("schedwatch, syscalls collector", start=lambda: Agent(*SYSCALLS_ONLY)),
        Config(
            "schedwatch, syscalls collector, --process-top-k 20",
            start=lambda: Agent(*SYSCALLS_ONLY, "--process-top-k", "20"),
        ),
        Config(
            "schedwatch, syscalls collector, keyed by process (hosts without cgroup2)",
            start=lambda: Agent(*SYSCALLS_ONLY, "--workloads-by", "process"),
        ),
        Config("schedwatch, all collectors", start=lambda: Agent()),
        Config("syscount-bpfcc", start=lambda: bcc_tool("syscount-bpfcc", ready="Tracing syscalls")),
        Config("perf trace -s", wrap=["perf", "trace", "-s", "-o", "/dev/null", "--"], divisor=20),
        Config("strace -f -c", wrap=["strace", "-f", "-c", "-o", "/dev/null"], divisor=50),
    ]


def run(repetitions: int) -> dict[str, Any]:
    """Measure everything; return raw samples, medians and the kernel's per-event accounting."""
    require("syscount-bpfcc", "perf", "strace", "gcc")
    binary = build("loops")
    workloads = [
        loop(binary, "sched_yield loop", "yield", 2_000_000),
        loop(binary, "futex ping-pong", "futex", 200_000),
        loop(binary, "getppid loop", "getppid", 4_000_000),
    ]
    samples = measure(configs(), workloads, repetitions)
    medians = {config: {w: median(v) for w, v in values.items()} for config, values in samples.items()}
    per_event = {
        "schedwatch": per_event_ns(SYSCALLS_ONLY, workloads[:2], PROGRAMS),
        "schedwatch --process-top-k 20": per_event_ns(
            (*SYSCALLS_ONLY, "--process-top-k", "20"), workloads[:2], PROGRAMS
        ),
        "schedwatch --workloads-by process": per_event_ns(
            (*SYSCALLS_ONLY, "--workloads-by", "process"), workloads[:2], PROGRAMS
        ),
    }
    return {"repetitions": repetitions, "samples": samples, "medians": medians, "per_event_ns": per_event}


def report(result: dict[str, Any]) -> str:
    """A Markdown table and the per-event costs."""
    return report_suite(result, skip_ratio=["getppid loop"])
