"""Pool workers: several processes running one command under one parent (a multiprocessing.Pool, a worker farm)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent.diagnosis.inputs.processes.sampling import ProcessFacts

MIN_WORKERS = 2


@dataclass(frozen=True)
class WorkerPool:
    """Processes of one command under one parent."""

    parent_pid: int
    command: str  # the exe's basename, or comm when the exe is not readable
    comms: tuple[str, ...]  # distinct comms of the workers (a pool may name each worker)
    pids: tuple[int, ...]

    @property
    def size(self) -> int:
        """How many workers."""
        return len(self.pids)


def worker_pools(processes: Iterable[ProcessFacts], minimum: int = MIN_WORKERS) -> list[WorkerPool]:
    """Groups of at least *minimum* processes sharing parent and command; largest first, then by parent."""
    groups: dict[tuple[int, str], list[ProcessFacts]] = {}
    for process in processes:
        groups.setdefault((process.ppid, process.command), []).append(process)
    pools = [
        WorkerPool(
            parent,
            command,
            tuple(sorted({member.comm for member in members})),
            tuple(sorted(member.pid for member in members)),
        )
        for (parent, command), members in groups.items()
        if len(members) >= minimum
    ]
    return sorted(pools, key=lambda pool: (-pool.size, pool.parent_pid, pool.command))
