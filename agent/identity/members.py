"""The processes of a workload: the cgroup directories it is labelled by, found in the cgroup tree the agent walks,
and their cgroup.procs (the reverse of agent.identity.workload, which labels a cgroup by its workload)."""

from __future__ import annotations

from pathlib import Path

from agent.identity.labels import label_value
from agent.identity.paths import container_id_from_path
from agent.identity.workload import Workload
from agent.machine.cgroups.files import parse_int
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.procfs import decode

MAX_PROCESSES = 512  # processes of one workload read closely at most


def in_workload(path: str, ref: Workload) -> bool:
    """Whether the cgroup at *path* is counted under *ref*."""
    if ref.container_id:
        return container_id_from_path(path) == ref.container_id
    return bool(ref.cgroup) and label_value(path) == ref.cgroup


def cgroup_paths(tree: Path | None) -> list[str]:
    """Every cgroup under *tree* now, as paths relative to it (walked once for all the workloads read closely)."""
    return [] if tree is None else sorted(CgroupPathResolver(tree).snapshot().values())


def workload_pids(tree: Path | None, paths: list[str], ref: Workload, limit: int = MAX_PROCESSES) -> list[int]:
    """Pids in the cgroups of *ref* (at most *limit*), among *paths* (cgroup_paths of the tree at *tree*)."""
    if tree is None:
        return []
    pids: list[int] = []
    for path in paths:
        if not in_workload(path, ref):
            continue
        try:
            text = decode((tree / path.lstrip("/") / "cgroup.procs").read_bytes())
        except OSError:
            continue  # removed meanwhile
        for word in text.split():
            pid = parse_int(word)
            if pid is not None and pid > 0:
                pids.append(pid)
            if len(pids) >= limit:
                return pids
    return pids
