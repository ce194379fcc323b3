"""Which workloads a user asked for: the --namespace/--pod/--container/--cgroup/--pid filter of diagnose, top,
profile and verify, and a --pid turned into the container or cgroup that holds it."""

from __future__ import annotations

from dataclasses import dataclass

from agent.identity.labels import label_value
from agent.identity.paths import container_id_from_path
from agent.identity.workload import Workload
from agent.machine.cgroups.layout import parse_proc_cgroup, read_layout
from agent.machine.procfs import SMALL_FILE, ProcFS

SHORT_ID = 12  # characters of a container id enough to name it, as docker ps shows it


class NoSuchProcess(ValueError):
    """A --pid that names no live process."""


@dataclass(frozen=True)
class Filter:
    """The workloads asked for; empty fields match everything."""

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
