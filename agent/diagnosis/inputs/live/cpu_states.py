"""CPU states of the node from /proc/stat: per CPU and in total, two readings -> percentages.

Only online CPUs have a ``cpuN`` line in /proc/stat, so the CPUs read are the online ones. guest and guest_nice
are already counted in user and nice, and are left out so that nothing is counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from agent.machine.procfs import ProcFS


@dataclass(frozen=True)
class CpuTicks:
    """Cumulative clock ticks of one CPU (or of all) in each state."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        """Ticks in every state."""
        return sum(getattr(self, state.name) for state in fields(self))


STATES: tuple[str, ...] = tuple(state.name for state in fields(CpuTicks))


@dataclass(frozen=True)
class NodeTicks:
    """One reading of /proc/stat."""

    total: CpuTicks
    cpus: dict[int, CpuTicks]  # by CPU number: the online CPUs

    @property
    def online(self) -> tuple[int, ...]:
        """Numbers of the online CPUs."""
        return tuple(sorted(self.cpus))


def parse_proc_stat(text: str) -> NodeTicks:
    """The cpu lines of /proc/stat; ValueError when there is no total line."""
    total: CpuTicks | None = None
    cpus: dict[int, CpuTicks] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *values = line.split()
        # Kernels before 2.6.11 have no steal column: missing states count as 0.
        numbers = [int(value) for value in values[: len(STATES)]] + [0] * (len(STATES) - len(values))
        ticks = CpuTicks(*numbers)
        if name == "cpu":
            total = ticks
        elif name[3:].isdigit():
            cpus[int(name[3:])] = ticks
    if total is None:
        raise ValueError("/proc/stat has no 'cpu' line")
    return NodeTicks(total, cpus)


def read_node(procfs: ProcFS) -> NodeTicks:
    """One reading of /proc/stat; OSError when it cannot be read."""
    text = procfs.read_root_text("stat")
    if text is None:
        raise OSError(f"cannot read {procfs.root / 'stat'}")
    return parse_proc_stat(text)


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
    before = read_node(procfs)
    sleep(interval)
    after = read_node(procfs)
    return node_states(before, after, clock() - started)
