"""Container runtimes: names and Kubernetes labels for a container id. One module per runtime API.

Every client bounds what it reads (MAX_ANSWER_BYTES, and its timeout over the whole call) and checks that the
answer is about the id it asked for. Kubernetes names (io.kubernetes.*) are taken only from a client told that
its runtime is the kubelet's (see docs/identity.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.identity.paths import is_container_id

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
CONTAINER_NAME = "io.kubernetes.container.name"
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # an inspect answer is a few kB; a runtime answering more is broken or lying


@dataclass(frozen=True)
class ContainerInfo:
    """What a runtime says about one container.

    ``pid`` is one of its processes in the host's pid namespace (0: the runtime did not say); the agent checks
    through it that a cgroup named after the container is the container's (agent.identity.resolver).
    """

    container: str
    pod: str = ""
    namespace: str = ""
    pid: int = 0


def socket_absent(path: Path) -> bool:
    """True when nothing is at *path* (the runtime is not installed here). A socket the agent may not even stat
    (a directory on the way it cannot search) counts as present, so that connecting to it says why it fails."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def worth_asking(socket_path: Path, container_id: str) -> bool:
    """Whether to ask the runtime at *socket_path* about *container_id*: only a container id (hex) is ever put into
    a request, and only when something is at the socket (see :func:`socket_absent`)."""
    return is_container_id(container_id) and not socket_absent(socket_path)


class RuntimeUnavailable(OSError):
    """The runtime's socket is missing, refuses, or does not answer in time."""


class RuntimeAnswerInvalid(ValueError):
    """The runtime answered, but not with a well-formed answer about the container asked for."""


class RuntimeClient(Protocol):
    """A runtime API client."""

    name: str

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """The container's identity, None if this runtime does not know it.

        Raises RuntimeUnavailable on transport errors, RuntimeAnswerInvalid on a malformed or lying answer.
        """


def info_from_labels(name: str, labels: Mapping[str, str], kubelet: bool, pid: int = 0) -> ContainerInfo:
    """The runtime's own container name; for the kubelet's runtime, the kubelet's labels win over it."""
    if not kubelet:
        return ContainerInfo(container=name, pid=pid)
    return ContainerInfo(
        container=labels.get(CONTAINER_NAME) or name,
        pod=labels.get(POD_NAME, ""),
        namespace=labels.get(POD_NAMESPACE, ""),
        pid=pid,
    )
