"""A cgroup path (and a process) -> the labels of the workload its counts belong to."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from agent.identity.labels import label_value
from agent.identity.paths import container_anchor
from agent.identity.resolver import Identity
from agent.machine.procfs import ProcFS


@dataclass(frozen=True)
class Workload:
    """Who a cgroup belongs to. ``cgroup`` is set only for what is not in a container. Values are label values."""

    container_id: str = ""
    container: str = ""
    pod: str = ""
    namespace: str = ""
    cgroup: str = ""

    @property
    def name(self) -> str:
        """How a person names it: namespace/pod/container, else the container, else the id's start, else the cgroup."""
        if self.pod:
            return "/".join(part for part in (self.namespace, self.pod, self.container) if part)
        return self.container or self.container_id[:12] or self.cgroup or "(unknown)"

    def labels(self) -> tuple[str, str, str, str, str]:
        """Label values in the order of :data:`agent.metrics.WORKLOAD_LABELS`."""
        return (self.container_id, self.container, self.pod, self.namespace, self.cgroup)


# Counts from cgroups that were removed before the agent could see their path.
REMOVED = Workload(cgroup="(removed)")
# Counts whose place cannot be found at all (the cgroup tree or /proc is not visible).
UNRESOLVED = Workload(cgroup="(unresolved)")


class Identities(Protocol):
    """Where names come from (agent.identity.resolver.IdentityResolver); never blocks."""

    def get(self, container_id: str) -> Identity | None:
        """The container's names if known yet."""


def workload_for_cgroup(cgroup_path: str | None, identities: Identities | None = None) -> Workload:
    """Identity of the workload in *cgroup_path* (None: a cgroup that is gone).

    A path naming a container gets the container id alone until a runtime has answered; then its names, if the
    path sits where the runtime's process for that container sits (its anchor); if it does not, the path merely
    looks like a container's and is exported as the plain cgroup it is.
    """
    if cgroup_path is None:
        return REMOVED
    container_id, anchor = _parsed(cgroup_path)
    if not container_id:
        return _plain(cgroup_path)
    identity = identities.get(container_id) if identities is not None else None
    if identity is None:
        return Workload(container_id=container_id)
    if identity.anchors is None:  # the runtime named no process: its names cannot be checked, so none are given
        return Workload(container_id=container_id)
    if anchor not in identity.anchors:
        return _plain(cgroup_path)
    return Workload(
        container_id=container_id, container=identity.container, pod=identity.pod, namespace=identity.namespace
    )


# Each scrape asks about every cgroup again: what the path alone decides is remembered (bounded, least recent out).
@lru_cache(maxsize=16384)
def _parsed(cgroup_path: str) -> tuple[str, str]:
    return container_anchor(cgroup_path)


@lru_cache(maxsize=16384)
def _plain(cgroup_path: str) -> Workload:
    """The workload of a cgroup that is no container's: its path alone."""
    return Workload(cgroup=label_value(cgroup_path))


def process_labels(pid: int, cgroup_path: str | None, identities: Identities, proc: ProcFS) -> list[str]:
    """Label values of a per-process series: pid, comm (set by the process: untrusted), then its workload's."""
    comm = proc.comm(pid)
    return [str(pid), label_value(comm or ""), *workload_for_cgroup(cgroup_path, identities).labels()]
