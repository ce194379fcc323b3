"""CPU states of the node from /proc/stat (read by agent.machine.node_stat): per CPU and in total, two readings ->
percentages."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.machine.node_stat import STATES, CpuTicks, NodeTicks, read_proc_stat
from agent.machine.procfs import ProcFS


@dataclass(frozen=True)
class CpuStates:
    """Share of time in each state between two readings, in percent (summing to 100 when the CPU ran at all)."""

    user: float
    nice: float
    system: float
    idle: float
    iowait: float
    irq: float
    softirq: float
    steal: float


def percentages(before: CpuTicks, after: CpuTicks) -> CpuStates:
    """Percent of the ticks between two readings spent in each state (all 0 when no tick passed)."""
    deltas = {state: max(0, getattr(after, state) - getattr(before, state)) for state in STATES}
    elapsed = sum(deltas.values())
    if elapsed == 0:
        return CpuStates(*([0.0] * len(STATES)))
    return CpuStates(**{state: 100.0 * delta / elapsed for state, delta in deltas.items()})


@dataclass(frozen=True)
class NodeStates:
    """CPU states of the node between two readings."""

    total: CpuStates
    cpus: dict[int, CpuStates]  # CPUs online in both readings
    seconds: float


def node_states(before: NodeTicks, after: NodeTicks, seconds: float) -> NodeStates:
    """Percentages between two readings, in total and per CPU online in both."""
    cpus = {cpu: percentages(before.cpus[cpu], ticks) for cpu, ticks in after.cpus.items() if cpu in before.cpus}
    return NodeStates(percentages(before.total, after.total), cpus, seconds)


def sample_node(
    procfs: ProcFS,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> NodeStates:
    """Read /proc/stat, wait *interval* seconds, read it again."""
    started = clock()
    before = read_proc_stat(procfs)
    sleep(interval)
    after = read_proc_stat(procfs)
    return node_states(before, after, clock() - started)
