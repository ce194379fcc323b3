"""How many pool workers a workload runs, cheaply: its cgroups' pids, each one's parent and command (/proc/PID/stat
and the exe link), grouped as worker_pools groups them. The standing evaluation counts this for flagged workloads
only, so that a fix read through Prometheus has the workers the node-side `diagnose` counts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.diagnosis.facts import Workload
from agent.diagnosis.inputs.processes.sampling import ProcessFacts
from agent.diagnosis.inputs.processes.workers import worker_pools
from agent.identity.members import workload_pids
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.process_stat import read_process_stat
from agent.machine.procfs import ProcFS, printable

MAX_COUNTED = 256  # processes of one workload read at most (a bigger pool still counts 256 workers: 1 thread each)


def pool_workers(procfs: ProcFS, pids: list[int]) -> int | None:
    """The workers of its pools together (groups of processes sharing parent and command; the node-side rule
    counts those that map a pool library), else 1 for a lone process; None when none of *pids* is alive, or when
    several are and none is in a pool (which of them run thread pools is not known without their maps)."""
    alive = []
    for pid in pids[:MAX_COUNTED]:
        stat = read_process_stat(procfs, pid)
        if stat is None:
            continue
        exe = procfs.readlink(pid, "exe")
        name = None if not exe else printable(exe.removesuffix(" (deleted)").rsplit("/", 1)[-1])
        alive.append(ProcessFacts(pid, stat.ppid, stat.comm, name, stat.state, stat.threads, 0, 0, 0, (), ()))
    if not alive:
        return None
    pools = worker_pools(alive)
    if pools:
        return sum(pool.size for pool in pools)
    return 1 if len(alive) == 1 else None


def counter(procfs: ProcFS, tree: Path | None) -> Callable[[list[Workload]], dict[Workload, int]]:
    """A function counting the pool workers of the given workloads. The cgroup tree is walked again only when a
    cgroup was made or removed since the last call, or a minute after the last walk (agent/machine/cgroups/paths.py):
    at 1,000 workloads a walk at every evaluation was a quarter of its cost."""
    resolver = CgroupPathResolver(tree)

    def count(refs: list[Workload]) -> dict[Workload, int]:
        if tree is None or not refs:
            return {}
        resolver.begin_round()
        paths = sorted(resolver.snapshot(this_round=True).values())
        found = {}
        for ref in refs:
            workers = pool_workers(procfs, workload_pids(tree, paths, ref, MAX_COUNTED))
            if workers is not None:
                found[ref] = workers
        return found

    return count
