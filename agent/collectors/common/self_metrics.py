"""A BPF collector's own cost and health as series: map fill, drops, program runs, time and misses, workloads
tracked.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.base import MapHealth
from agent.bpf.stats import ProgramStats


def self_families(collector: str, health: MapHealth, programs: Iterable[ProgramStats], workloads: int) -> list[Metric]:
    """The collector's own cost and health: map fill, drops, program run counts, time and misses, workloads
    tracked."""
    entries = metrics.BPF_MAP_ENTRIES.family()
    capacity = metrics.BPF_MAP_MAX_ENTRIES.family()
    dropped = metrics.BPF_EVENTS_DROPPED.family()
    runs = metrics.BPF_PROGRAM_RUNS.family()
    run_seconds = metrics.BPF_PROGRAM_RUN_SECONDS.family()
    misses = metrics.BPF_PROGRAM_MISSES.family()
    tracked = metrics.TRACKED_SERIES.family()
    for name, count in health.entries.items():
        entries.add_metric([collector, name], count)
        capacity.add_metric([collector, name], health.capacity[name])
    for name, count in health.drops.items():
        dropped.add_metric([collector, name], count)
    for program in programs:
        runs.add_metric([collector, program.program], program.runs)
        run_seconds.add_metric([collector, program.program], program.run_seconds)
        if program.misses is not None:
            misses.add_metric([collector, program.program], program.misses)
    tracked.add_metric([collector], workloads)
    return [entries, capacity, dropped, runs, run_seconds, misses, tracked]
