"""A workload's code attribution over a window, from the agent's code rows: on-CPU samples by library, function and
mode (the oncpu collector) and the call sites of its sched_yield calls and futex waits (syscalls).

Each row's count is its growth over the window. A row whose series started again within the window (it left the
workload's top rows and came back, docs/attribution.md) counts what its new series counted. The ``(other)`` row
counts in the total but is no row of its own: it names no code. Without the collector, or without any row for the
workload in the window, the facts are unknown (None).
"""

from __future__ import annotations

from dataclasses import replace

from agent import metrics
from agent.diagnosis.facts import CodeShare, Workload, WorkloadView
from agent.diagnosis.inputs.live.window import Window
from agent.metrics import MetricSpec
from agent.series.schema import PART
from agent.tables import files, syscalls

OTHER = "(other)"
UNKNOWN = "(unknown)"
ONCPU_COLLECTOR = files.ONCPU.collector
SITES_COLLECTOR = syscalls.TABLE.collector


def with_code_inputs(window: Window, view: WorkloadView) -> WorkloadView:
    """*view* with its on-CPU samples and call sites over *window*."""
    ref = view.ref
    samples, total = code_rows(window, ref, metrics.CPU_SAMPLES, ONCPU_COLLECTOR)
    yields, _yields_total = code_rows(window, ref, metrics.SCHED_YIELD_CALLS_BY_SITE, SITES_COLLECTOR)
    waits, _waits_total = code_rows(window, ref, metrics.FUTEX_WAITS_BY_SITE, SITES_COLLECTOR)
    return replace(view, cpu_samples=samples, cpu_samples_total=total, yield_sites=yields, futex_sites=waits)


def code_rows(
    window: Window, ref: Workload, spec: MetricSpec, collector: str
) -> tuple[tuple[CodeShare, ...] | None, float | None]:
    """The rows of *spec* that grew over the window, busiest first, and the growth of every row with (other)."""
    if collector not in window.after.up:
        return None, None
    after = window.after.workloads.get(ref)
    if after is None:
        return None, None
    before = window.before.workloads.get(window.earlier_ref(ref))
    before_counts = before.parts(spec) if before is not None else {}
    shares: list[CodeShare] = []
    total = 0.0
    for row, value in after.parts(spec).items():
        grown = value - before_counts.get(row, 0.0)
        if grown < 0:  # a new series under the same labels (see the module's text)
            grown = value
        if grown <= 0:
            continue
        total += grown
        parts = row.split(PART)
        library, version, function = parts[0], parts[1], parts[2]
        if library == OTHER:
            continue
        mode = parts[3] if len(parts) > 3 else "user"
        shares.append(CodeShare(library, None if function == UNKNOWN else function, mode, grown, version or None))
    if total <= 0:
        return None, None
    shares.sort(key=lambda share: -share.count)
    return tuple(shares), total
