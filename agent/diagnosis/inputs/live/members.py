"""Which workloads a filter names, and the processes of a workload: the cgroup directories it is labelled by,
found in the cgroup tree the agent walks, and their cgroup.procs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.diagnosis.facts import Workload
from agent.identity.labels import label_value
from agent.identity.paths import container_id_from_path
from agent.machine.cgroups.files import parse_int
from agent.machine.cgroups.layout import parse_proc_cgroup, read_layout
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.procfs import SMALL_FILE, ProcFS, decode

MAX_PROCESSES = 512  # processes of one workload read closely at most
SHORT_ID = 12  # characters of a container id enough to name it, as docker ps shows it


class NoSuchProcess(ValueError):
    """A --pid that names no live process."""


@dataclass(frozen=True)
class Filter:
    """What `diagnose` was asked to look at; empty fields match everything."""

    namespace: str = ""
    pod: str = ""
    container: str = ""  # a container name, or an id (at least 12 hex characters of it)
    cgroup: str = ""  # a cgroup path: that cgroup and the cgroups below it
    pid: int | None = None

    @property
    def empty(self) -> bool:
        """Nothing asked for: every workload is ranked."""
        return not (self.namespace or self.pod or self.container or self.cgroup or self.pid is not None)

    def matches(self, ref: Workload) -> bool:
        """Whether *ref* is one of the workloads asked for (a --pid is resolved into --cgroup/--container first)."""
        if self.namespace and ref.namespace != self.namespace:
            return False
        if self.pod and ref.pod != self.pod:
            return False
        if self.container and not _container_matches(ref, self.container):
            return False
        return not self.cgroup or ref.cgroup == self.cgroup or ref.cgroup.startswith(self.cgroup.rstrip("/") + "/")


def _container_matches(ref: Workload, wanted: str) -> bool:
    if ref.container == wanted:
        return True
    return len(wanted) >= SHORT_ID and bool(ref.container_id) and ref.container_id.startswith(wanted)


def cgroup_of(procfs: ProcFS, pid: int, order: tuple[str, ...] | None = None) -> str:
    """The path of *pid* in the workload hierarchy (*order*: the layout's placing order, by default this mount
    namespace's): cgroup2's, or on a host without it its v1 systemd path, whatever cgroup2 line /proc shows there;
    NoSuchProcess when it is gone."""
    text = procfs.read_text(pid, "cgroup", SMALL_FILE)
    if text is None:
        raise NoSuchProcess(f"no process {pid}: give the pid of a running process (as the host sees it)")
    paths = parse_proc_cgroup(text)
    if order is None:
        order = read_layout().placing_order
    return next((paths[name] for name in order if name in paths), None) or paths.get("") or "/"


def filter_for_pid(procfs: ProcFS, base: Filter) -> Filter:
    """*base* with its --pid turned into the container or cgroup that holds the process."""
    if base.pid is None:
        return base
    path = cgroup_of(procfs, base.pid)
    container_id = container_id_from_path(path)
    if container_id:
        return Filter(base.namespace, base.pod, container_id, base.cgroup, base.pid)
    return Filter(base.namespace, base.pod, base.container, label_value(path), base.pid)


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
