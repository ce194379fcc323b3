"""How long the kernel says tasks waited for a CPU: what a timing tolerance widens by on a shared machine.

A bound on a rate or a duration that the workload or the reader can only meet while it has a CPU (a paced thread
that catches up its missed ticks, a reading stamped at the middle of a collection) holds on a quiet machine and is
off on a busy one by at most the time they waited for one. The kernel counts that time: ``cpu.pressure`` ("some":
at least one task of the cgroup runnable and not running) and each thread's ``schedstat`` run delay.
"""

from __future__ import annotations

from pathlib import Path


def cgroup_stall_seconds(directory: Path) -> float:
    """Seconds during which some task of the cgroup at *directory* waited for a CPU (its cpu.pressure "some")."""
    for line in (directory / "cpu.pressure").read_text().splitlines():
        kind, *fields = line.split()
        if kind == "some":
            return int(dict(field.split("=") for field in fields)["total"]) / 1e6
    raise AssertionError(f"no 'some' line in {directory / 'cpu.pressure'}")


def _schedstat_seconds(pid: int, field: int) -> float:
    """One field of schedstat summed over the threads of *pid* alive now, in seconds."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[field])
        except FileNotFoundError:
            continue  # a thread that exited since the listing
    return total / 1e9


def run_delay_seconds(pid: int) -> float:
    """Seconds the threads of *pid* alive now waited on a run queue over their lives (2nd field of schedstat)."""
    return _schedstat_seconds(pid, 1)


def on_cpu_seconds(pid: int) -> float:
    """Seconds the threads of *pid* alive now ran on a CPU over their lives (1st field of schedstat)."""
    return _schedstat_seconds(pid, 0)


class Stalls:
    """The CPU waits of some cgroups and processes from now on: :meth:`seconds` is how long they waited in all."""

    def __init__(self, cgroups: tuple[Path, ...] = (), pids: tuple[int, ...] = ()) -> None:
        self.cgroups, self.pids = cgroups, pids
        self._start = self._read()

    def _read(self) -> list[float]:
        return [cgroup_stall_seconds(c) for c in self.cgroups] + [run_delay_seconds(p) for p in self.pids]

    def seconds(self) -> float:
        """The waits since this was made (a process's threads that exited meanwhile take theirs with them: each
        process counts at least 0)."""
        return sum(max(0.0, now - then) for now, then in zip(self._read(), self._start, strict=True))
