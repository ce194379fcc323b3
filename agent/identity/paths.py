"""Container ids in cgroup paths. The only module that knows what a container id looks like."""

from __future__ import annotations

import re

# One cgroup path component that names a container: a 64-hex id, bare (Docker and
# Kubernetes with the cgroupfs driver), wrapped by a runtime's systemd scope, or in
# the "slice:runtime:id" form runc's systemd driver leaves in v1 hierarchies that
# systemd does not manage (and some runtimes' cgroupfs fallbacks on v2).
# Conmon scopes ("libpod-conmon-<id>", "crio-conmon-<id>") are the monitor, not the container.
_CONTAINER_COMPONENT = re.compile(
    r"^(?:[^/:]+\.slice:(?:cri-containerd|crio|docker|containerd|libpod):)?"
    r"(?:docker-|cri-containerd-|crio-|libpod-|containerd-)?(?P<id>[0-9a-f]{64})(?:\.scope)?$"
)
HEX_ID = re.compile(r"[0-9a-f]{64}")


def container_id_from_path(cgroup_path: str) -> str:
    """The container id named by the deepest matching component of *cgroup_path*, or ''."""
    return container_anchor(cgroup_path)[0]


def container_anchor(cgroup_path: str) -> tuple[str, str]:
    """(container id, the path up to and including the component naming it); ('', '') outside any container.

    The anchor is where the runtime put the container: two paths with the same id but different anchors are
    different cgroups, only one of which can be the container's.
    """
    components = cgroup_path.split("/")
    for index in range(len(components) - 1, -1, -1):
        match = _CONTAINER_COMPONENT.match(components[index])
        if match:
            return match.group("id"), "/".join(components[: index + 1])
    return "", ""


def is_container_id(text: str) -> bool:
    """Whether *text* is a full 64-hex container id (the only thing ever put into a runtime request)."""
    return HEX_ID.fullmatch(text) is not None
