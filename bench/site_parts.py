"""Issue-33 benchmark: what each part of the call-site count costs per sched_yield, by the kernel's accounting.

`python -m bench site_parts [--repetitions N]`: bench/site_parts.bpf.c built at each level (PARTS = 0, the yield
counted in its workload, up to 3, the whole call-site count of bpf/syscalls.bpf.c), each loaded alone while a loop
pinned to CPU 1 makes 2,000,000 yields; then the whole count with the two registers read by plain loads
(DIRECT_REGS) instead of bpf_probe_read_kernel. A part's cost is its level's median minus the level below.
"""

from __future__ import annotations

import os
from typing import Any

from bench.attribution import YIELDS
from bench.common import BENCH, Workload, build, median, require
from bench.parts import level_ns, report_levels

SOURCE = BENCH / "site_parts.bpf.c"
PARTS = (
    "the yield counted in its workload (sites not counted)",
    "+ the saved user registers (bpf_probe_read_kernel, 32 bytes)",
    "+ the return address at the stack pointer (bpf_probe_read_user, 8 bytes)",
    "+ the per-CPU last-site slot (process id, compare, one call pending)",
)
DIRECT = "the whole count, registers read by plain loads"
SIZES = ("-DMAX_CGROUPS=4096", f"-DMAX_CPUS={os.cpu_count()}")


def yield_loop() -> Workload:
    """bench/workloads/loops.c's yield loop, pinned to CPU 1."""
    binary = build("loops")
    return Workload("yield loop", lambda n: ["taskset", "-c", "1", str(binary), "yield", str(n)], YIELDS)


def run(repetitions: int) -> dict[str, Any]:
    """Every level and the variant, every repetition."""
    require("taskset", "gcc")
    loop = yield_loop()
    samples: dict[str, list[float]] = {name: [] for name in (*PARTS, DIRECT)}
    for _ in range(repetitions):
        for level, name in enumerate(PARTS):
            samples[name].append(level_ns(SOURCE, [f"-DPARTS={level}", *SIZES], "sys_enter_sched_yield", loop))
        samples[DIRECT].append(
            level_ns(SOURCE, [f"-DPARTS={len(PARTS) - 1}", "-DDIRECT_REGS", *SIZES], "sys_enter_sched_yield", loop)
        )
    return {"repetitions": repetitions, "samples": samples}


def report(result: dict[str, Any]) -> str:
    """Each level's median and what its part adds; the whole count's cost per yield."""
    at = {name: median(values) for name, values in result["samples"].items()}
    lines = report_levels(result, PARTS, "sched_yield run (a loop pinned to one CPU)")
    return "\n".join(
        [
            *lines,
            "",
            f"- the call-site count adds {at[PARTS[-1]] - at[PARTS[0]]:+.0f} ns per yield "
            f"({at[DIRECT] - at[PARTS[0]]:+.0f} with the registers read by plain loads)",
        ]
    )
