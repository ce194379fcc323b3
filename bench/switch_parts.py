"""Issue-33 benchmark: what each part of schedwatch's sched_switch path costs, by the kernel's accounting (bpf_stats).

`python -m bench switch_parts [--repetitions N]`: bench/switch_parts.bpf.c built at each level (PARTS = 0, the clock
read alone, up to 5, every part of what bpf/sched.bpf.c does for a woken thread's switch), each loaded alone while
`perf bench sched pipe` runs pinned to CPU 0, then the agent's own program (the sched collector alone) under the
same workload; levels and the agent interleaved in every repetition. A part's cost is its level's median minus
the median of the level below. Two variants of the last level find the threads' states (-DSLOTS), and the
workload's totals too (-DWORKLOAD_SLOTS), in array slots, as the agent's program does since issue 33.
"""

from __future__ import annotations

from typing import Any

from bench.common import BENCH, median, per_event_ns, require
from bench.parts import level_ns, report_levels
from bench.sched import SCHED_ONLY, pipe_workload

SOURCE = BENCH / "switch_parts.bpf.c"
SWITCH = "sched/sched_switch"
PARTS = (
    "the clock read (the clock-only floor)",
    "+ the outgoing thread's entry (hash lookup), its off-CPU period written",
    "+ the cgroup-move check (array slot)",
    "+ the incoming thread's entry (hash lookup), its period read and cleared",
    "+ its workload's totals (hash lookup)",
    "+ five atomic adds into those totals",
)
SLOTS = "all five, the threads' states in array slots"
WORKLOAD_SLOTS = "all five, the threads' states and the workload's totals in array slots (as bpf/sched.bpf.c does)"
AGENT = "schedwatch's sched_switch (the agent, sched collector alone)"
MAP_SIZES = ("-DMAX_THREADS=65536", "-DMAX_CGROUPS=4096")  # the agent's defaults (agent/config/settings.py)


def run(repetitions: int) -> dict[str, Any]:
    """Every level and the agent, every repetition."""
    require("perf", "taskset")
    samples: dict[str, list[float]] = {name: [] for name in (*PARTS, SLOTS, WORKLOAD_SLOTS, AGENT)}
    for _ in range(repetitions):
        for level, name in enumerate(PARTS):
            samples[name].append(level_ns(SOURCE, [f"-DPARTS={level}", *MAP_SIZES], "sched_switch", pipe_workload()))
        slots = ["-DPARTS=5", "-DSLOTS", *MAP_SIZES]
        samples[SLOTS].append(level_ns(SOURCE, slots, "sched_switch", pipe_workload()))
        both = [*slots, "-DWORKLOAD_SLOTS"]
        samples[WORKLOAD_SLOTS].append(level_ns(SOURCE, both, "sched_switch", pipe_workload()))
        samples[AGENT].append(per_event_ns(SCHED_ONLY, [pipe_workload()], (SWITCH,))[SWITCH])
    return {"repetitions": repetitions, "samples": samples}


def report(result: dict[str, Any]) -> str:
    """Each level's median, what its part adds, and the agent's program against the clock-only floor."""
    at = {name: median(values) for name, values in result["samples"].items()}
    lines = report_levels(result, PARTS, "sched_switch run (`perf bench sched pipe` pinned to one CPU)")
    ratio = at[AGENT] / at[PARTS[0]]
    return "\n".join([*lines, "", f"- the agent's `sched_switch`: {ratio:.2f}x the clock-only floor"])
