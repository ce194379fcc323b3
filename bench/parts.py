"""What each part of a BPF program costs: a source built up one part at a time (-DPARTS=level), each level loaded
alone while a workload runs, measured by the kernel's accounting (bpf_stats). Used by switch_parts and site_parts."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import Workload, median


def level_ns(source: Path, cflags: Sequence[str], program: str, workload: Workload) -> float:
    """ns per run of *program* (its tracepoint's name) of *source* built with *cflags*, while *workload* runs once."""
    from agent.bpf.compile import import_bcc
    from agent.bpf.stats import enable_bpf_stats, program_stats
    from agent.machine import kernel

    kernel.prepare_headers(kernel.find_kernel_headers(kernel.kernel_release(), os.environ), Path("/run/schedwatch"))
    stats_fd = enable_bpf_stats()
    loaded = import_bcc().BPF(src_file=str(source).encode(), cflags=list(cflags))
    fds = {name.decode(): function.fd for name, function in loaded.funcs.items()}
    try:
        before = {s.program: s for s in program_stats(fds)}[program]
        workload.run()
        time.sleep(0.2)
        after = {s.program: s for s in program_stats(fds)}[program]
    finally:
        loaded.cleanup()
        os.close(stats_fd)
    return (after.run_seconds - before.run_seconds) / (after.runs - before.runs) * 1e9


def report_levels(result: dict[str, Any], levels: Sequence[str], unit: str) -> list[str]:
    """Markdown rows: each level's median (every run in brackets) and what it adds to the level above it; rows after
    *levels* (the agent's own program, variants) are given without an increment."""
    samples = result["samples"]
    at = {name: median(values) for name, values in samples.items()}
    lines = [
        f"Kernel accounting (bpf_stats), ns per {unit}, median of {result['repetitions']} (every run in brackets):",
        "",
        "| level | ns | part adds |",
        "| --- | --- | --- |",
    ]
    below = None
    for name, values in samples.items():
        runs = ", ".join(f"{value:.0f}" for value in values)
        adds = f"{at[name] - below:+.0f}" if below is not None and name in levels else ""
        lines.append(f"| {name} | {at[name]:.0f} ({runs}) | {adds} |")
        below = at[name] if name in levels else below
    return lines
