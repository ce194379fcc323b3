"""Several artifacts of one environment -> one set of facts: node facts from top, mpstat and vmstat, workload
facts from perf trace, strace, pidstat and top; the first tool (in the orders below) that knows a fact gives it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TypeVar

from agent.diagnosis.facts import Facts, NodeView, ProcessView, ThreadView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.known import seconds_by_call, sum_known
from agent.diagnosis.inputs.artifacts.part import Part

NODE_ORDER = ("mpstat", "vmstat", "top", "pidstat")  # machine-wide averages first, a single screen after
WORKLOAD_ORDER = ("perf trace -s", "strace -c", "pidstat", "top")  # per-thread counts first
NO_WORKLOAD_NAME = (
    "the artifacts do not name the workload's container or cgroup: its processes and threads are those the tools showed"
)

Record = TypeVar("Record", NodeView, WorkloadView, ThreadView, ProcessView)


def _ordered(parts: Iterable[Part], order: Sequence[str]) -> list[Part]:
    return sorted(parts, key=lambda part: order.index(part.kind) if part.kind in order else len(order))


def first_known(records: Sequence[Record]) -> Record:
    """One record whose every field is the first non-None value of that field among *records*."""
    values = {}
    for field in dataclasses.fields(records[0]):
        values[field.name] = next(
            (getattr(record, field.name) for record in records if getattr(record, field.name) not in (None, ())),
            getattr(records[0], field.name),
        )
    return dataclasses.replace(records[0], **values)


def _threads(groups: Iterable[tuple[ThreadView, ...] | None]) -> tuple[ThreadView, ...] | None:
    merged: dict[object, list[ThreadView]] = {}
    seen = False
    for number, group in enumerate(groups):
        if group is None:
            continue
        seen = True
        for index, thread in enumerate(group):
            key = thread.tid if thread.tid is not None else ("no id", number, index)
            merged.setdefault(key, []).append(thread)
    return tuple(first_known(views) for views in merged.values()) if seen else None


def _processes(groups: Iterable[tuple[ProcessView, ...] | None]) -> tuple[ProcessView, ...] | None:
    merged: dict[int, list[ProcessView]] = {}
    seen = False
    for group in groups:
        if group is None:
            continue
        seen = True
        for process in group:
            merged.setdefault(process.pid, []).append(process)
    return tuple(first_known(views) for views in merged.values()) if seen else None


def _added(merged: WorkloadView, views: Sequence[WorkloadView]) -> WorkloadView:
    """*merged* with the totals of several traces of one kind (each of other threads) added up."""
    threads = sum_known(view.threads for view in views)
    return dataclasses.replace(
        merged,
        threads=None if threads is None else int(threads),
        sched_yield_calls=sum_known(view.sched_yield_calls for view in views),
        futex_wait_seconds=sum_known(view.futex_wait_seconds for view in views),
        syscall_seconds=seconds_by_call(pair for view in views for pair in (view.syscall_seconds or {}).items()),
    )


def merge_node(parts: Sequence[Part]) -> tuple[NodeView, list[str]]:
    """The node: each fact from the first tool in NODE_ORDER that printed it."""
    ordered = _ordered(parts, NODE_ORDER)
    if not ordered:
        return NodeView(), []
    node = first_known([part.node for part in ordered])
    notes = []
    with_cpu = [part for part in ordered if part.node.cpu is not None]
    if len(with_cpu) > 1:
        others = ", ".join(part.kind for part in with_cpu[1:])
        notes.append(f"node CPU shares from {with_cpu[0].kind} ({with_cpu[0].source}); {others} saw other moments")
    return node, notes


def merge_workload(parts: Sequence[Part]) -> tuple[WorkloadView | None, list[str]]:
    """The one workload the artifacts describe; None when no tool told anything about it.

    Each fact comes from the first tool in WORKLOAD_ORDER that knows it; threads and processes are merged by id.
    """
    ordered = [part for part in _ordered(parts, WORKLOAD_ORDER) if part.workload is not None]
    if not ordered:
        return None, []
    views = [part.workload for part in ordered if part.workload is not None]
    notes: list[str] = [NO_WORKLOAD_NAME]
    merged = first_known(views)
    merged = dataclasses.replace(
        merged,
        ref=Workload(),
        thread_views=_threads(view.thread_views for view in views),
        processes=_processes(view.processes for view in views),
    )
    counters = [part for part in ordered if part.untimed_counts]
    timed = [part for part in ordered if part.workload is not None and part.workload.seconds is not None]
    if len({part.kind for part in counters}) > 1:
        other = next(part.kind for part in counters if part.kind != counters[0].kind)
        notes.append(f"{counters[0].kind} and {other} traced different runs: counts from {counters[0].kind}")
    same = [part.workload for part in counters if part.kind == counters[0].kind and part.workload is not None]
    if len(same) > 1:
        merged = _added(merged, same)
        notes.append(f"{len(same)} {counters[0].kind} files: their counts are added (threads, processes traced apart)")
    if counters and timed:
        # One window per workload: the timed tool's (its shares and waits are true rates); the tracer's totals,
        # which cover a window nobody printed, would be divided by the wrong one. Per-thread counts stay.
        merged = dataclasses.replace(
            merged,
            sched_yield_calls=None,
            futex_calls=None,
            futex_wait_seconds=None,
            seconds=timed[0].workload.seconds if timed[0].workload else None,
        )
        notes.append(
            f"{counters[0].kind} covers a window it does not print, {timed[0].kind} one of "
            f"{merged.seconds:g} s: the window is {timed[0].kind}'s, and {counters[0].kind}'s counts are kept "
            "per thread only (its workload totals are left out)"
        )
    return merged, notes


def merge(parts: Sequence[Part]) -> Facts:
    """One environment's facts from the parts of its files, with every source and note (each note once)."""
    node, node_notes = merge_node(parts)
    workload, workload_notes = merge_workload(parts)
    notes: list[str] = []
    for note in [*workload_notes, *node_notes, *(note for part in parts for note in part.notes)]:
        if note not in notes:
            notes.append(note)
    return Facts(
        node=node,
        workloads=() if workload is None else (workload,),
        sources=tuple(f"{part.kind} {part.source}" for part in parts),
        notes=tuple(notes),
    )
