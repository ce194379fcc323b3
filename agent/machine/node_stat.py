"""The one parser of /proc/stat: CPU ticks per state (in total and per online CPU), boot time, context switches
and runnable tasks.

Only online CPUs have a ``cpuN`` line, so the CPUs read are the online ones. guest and guest_nice are already
counted in user and nice, and are left out so that nothing is counted twice.
"""

from __future__ import annotations

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
    boot_time: float | None = None  # btime: seconds since the epoch when the machine booted
    context_switches: int | None = None  # ctxt, since boot
    procs_running: int | None = None  # runnable tasks now (the reader among them)

    @property
    def online(self) -> tuple[int, ...]:
        """Numbers of the online CPUs."""
        return tuple(sorted(self.cpus))


def parse_proc_stat(text: str) -> NodeTicks:
    """The lines of /proc/stat used here; ValueError when there is no total cpu line."""
    total: CpuTicks | None = None
    cpus: dict[int, CpuTicks] = {}
    counters: dict[str, int] = {}
    for line in text.splitlines():
        name, *values = line.split() or [""]
        if name.startswith("cpu"):
            # Kernels before 2.6.11 have no steal column: missing states count as 0.
            numbers = [int(value) for value in values[: len(STATES)]] + [0] * (len(STATES) - len(values))
            ticks = CpuTicks(*numbers)
            if name == "cpu":
                total = ticks
            elif name[3:].isdigit():
                cpus[int(name[3:])] = ticks
        elif name in ("btime", "ctxt", "procs_running") and values and values[0].isdigit():
            counters[name] = int(values[0])
    if total is None:
        raise ValueError("/proc/stat has no 'cpu' line")
    btime = counters.get("btime")
    return NodeTicks(
        total,
        cpus,
        boot_time=None if btime is None else float(btime),
        context_switches=counters.get("ctxt"),
        procs_running=counters.get("procs_running"),
    )


def read_proc_stat(procfs: ProcFS) -> NodeTicks:
    """One reading of /proc/stat; OSError when it cannot be read, ValueError when it is not /proc/stat."""
    text = procfs.read_root_text("stat")
    if text is None:
        raise OSError(f"cannot read {procfs.root / 'stat'}")
    return parse_proc_stat(text)
