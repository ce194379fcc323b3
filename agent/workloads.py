"""cgroup path -> workload identity. The only module that knows what a container id looks like."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from agent.procfs import printable
from agent.runtimes import ContainerInfo

MAX_LABEL_LENGTH = 200

# One cgroup path component that names a container: a 64-hex id, bare (Docker and
# Kubernetes with the cgroupfs driver), wrapped by a runtime's systemd scope, or in
# the "slice:runtime:id" form runc's systemd driver leaves in v1 hierarchies that
# systemd does not manage (and some runtimes' cgroupfs fallbacks on v2).
# Conmon scopes ("libpod-conmon-<id>", "crio-conmon-<id>") are the monitor, not the container.
_CONTAINER_COMPONENT = re.compile(
    r"^(?:[^/:]+\.slice:(?:cri-containerd|crio|docker|containerd|libpod):)?"
    r"(?:docker-|cri-containerd-|crio-|libpod-|containerd-)?(?P<id>[0-9a-f]{64})(?:\.scope)?$"
)


@dataclass(frozen=True)
class Workload:
    """Who a cgroup belongs to. ``cgroup`` is set only for what is not in a container."""

    container_id: str = ""
    container: str = ""
    pod: str = ""
    namespace: str = ""
    cgroup: str = ""

    def labels(self) -> tuple[str, str, str, str, str]:
        """Label values in the order of :data:`agent.metrics.WORKLOAD_LABELS`."""
        return (self.container_id, self.container, self.pod, self.namespace, self.cgroup)


# Counts from cgroups that were removed before the agent could see their path.
REMOVED = Workload(cgroup="(removed)")


def container_id_from_path(cgroup_path: str) -> str:
    """The container id named by the deepest matching component of *cgroup_path*, or ''."""
    for component in reversed(cgroup_path.split("/")):
        match = _CONTAINER_COMPONENT.match(component)
        if match:
            return match.group("id")
    return ""


class Identities(Protocol):
    """Where names come from (agent.identity.IdentityResolver); never blocks."""

    def get(self, container_id: str) -> ContainerInfo | None:
        """The container's names if known yet."""


def workload_for_cgroup(cgroup_path: str | None, identities: Identities | None = None) -> Workload:
    """Identity of the workload in *cgroup_path* (None: a cgroup that is gone).

    Names come from *identities* once a runtime has answered; until then the container id alone.
    """
    if cgroup_path is None:
        return REMOVED
    container_id = container_id_from_path(cgroup_path)
    if not container_id:
        return Workload(cgroup=bounded_label(cgroup_path))
    info = identities.get(container_id) if identities is not None else None
    if info is None:
        return Workload(container_id=container_id)
    return Workload(
        container_id=container_id,
        container=bounded_label(info.container),
        pod=bounded_label(info.pod),
        namespace=bounded_label(info.namespace),
    )


def bounded_label(value: str) -> str:
    """Valid UTF-8 (undecodable bytes shown as \\xNN), cut to a bounded length, keeping its tail (the informative end
    of a path)."""
    value = printable(value)
    if len(value) <= MAX_LABEL_LENGTH:
        return value
    return "…" + value[-(MAX_LABEL_LENGTH - 1) :]
