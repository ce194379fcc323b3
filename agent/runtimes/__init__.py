"""Container runtimes: names and Kubernetes labels for a container id. One module per runtime API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
CONTAINER_NAME = "io.kubernetes.container.name"


@dataclass(frozen=True)
class ContainerInfo:
    """What a runtime says about one container."""

    container: str
    pod: str = ""
    namespace: str = ""


class RuntimeUnavailable(OSError):
    """The runtime's socket is missing, refuses, or does not answer in time."""


class RuntimeClient(Protocol):
    """A runtime API client."""

    name: str

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """The container's identity, None if this runtime does not know it; RuntimeUnavailable on transport errors."""


def info_from_labels(name: str, labels: Mapping[str, str]) -> ContainerInfo:
    """Kubelet labels win over the runtime's own container name."""
    return ContainerInfo(
        container=labels.get(CONTAINER_NAME) or name,
        pod=labels.get(POD_NAME, ""),
        namespace=labels.get(POD_NAMESPACE, ""),
    )
