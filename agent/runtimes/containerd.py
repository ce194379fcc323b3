"""containerd's own API over gRPC (containers.v1.Containers/Get): the labels the kubelet's CRI plugin sets.

Messages are encoded by hand (agent.runtimes.protowire): the request is one string field, and of the reply only
the container's labels (field 2 of Container, a map<string, string>) are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.runtimes import ContainerInfo, RuntimeUnavailable, info_from_labels
from agent.runtimes.protowire import message, string_field, string_map_of

GET_CONTAINER = "/containerd.services.containers.v1.Containers/Get"


class ContainerdClient:
    """Container labels from containerd, searched in each configured namespace."""

    name = "containerd"

    def __init__(self, socket_path: Path, namespaces: Sequence[str], timeout: float = 1.0) -> None:
        self.socket_path = socket_path
        self.namespaces = list(namespaces)
        self.timeout = timeout
        self._get: Any = None

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """The container's labels in the first namespace that knows it."""
        if not self.socket_path.exists():
            return None  # this runtime is not installed here
        import grpc

        get = self._method(grpc)
        for namespace in self.namespaces:
            try:
                reply = get(
                    string_field(1, container_id), metadata=[("containerd-namespace", namespace)], timeout=self.timeout
                )
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.NOT_FOUND:
                    continue
                raise RuntimeUnavailable(f"containerd at {self.socket_path}: {error.code().name}") from error
            # GetContainerResponse{container = 1} -> Container{labels = 2}
            return info_from_labels("", string_map_of(message(reply, 1), 2))
        return None

    def _method(self, grpc: Any) -> Any:
        if self._get is None:
            channel = grpc.insecure_channel(f"unix://{self.socket_path}")
            self._get = channel.unary_unary(
                GET_CONTAINER, request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw
            )
        return self._get
