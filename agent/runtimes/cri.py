"""The kubelet's Container Runtime Interface (containerd's CRI plugin, CRI-O) over gRPC.

ContainerStatus gives the container's name (its CRI metadata) and the labels the kubelet set on it
(io.kubernetes.pod.name, ...). An id the runtime does not know as a container may be a pod sandbox (the pause
container, whose cgroup holds the pod's infra process): PodSandboxStatus then gives the pod, and the container is
named "POD" as the kubelet names it. Runtimes older than runtime.v1 (containerd < 1.6, CRI-O < 1.23) serve the
same messages as runtime.v1alpha2; the first call that gets UNIMPLEMENTED switches to it for good.

Messages are encoded by hand (agent.runtimes.protowire); of each reply only metadata and labels are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.runtimes import POD_NAME, POD_NAMESPACE, ContainerInfo, RuntimeUnavailable, info_from_labels
from agent.runtimes.protowire import fields, message, message_field, string, string_field, string_map_of

API_VERSIONS = ("runtime.v1", "runtime.v1alpha2")
SANDBOX_CONTAINER_NAME = "POD"

# ContainerStatusResponse{status = 1} -> ContainerStatus{metadata = 2 {name = 1}, labels = 12}
# PodSandboxStatusResponse{status = 1} -> PodSandboxStatus{metadata = 2 {name = 1, namespace = 3}}
# ListContainersRequest{filter = 1 {id = 1}} -> ListContainersResponse{containers = 1 {pod_sandbox_id = 2}}


class _NotFound(Exception):
    pass


class CriClient:
    """Container and pod names from a CRI runtime socket."""

    def __init__(self, socket_path: Path, timeout: float = 1.0, api_versions: Sequence[str] = API_VERSIONS) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.name = f"cri:{socket_path.stem}"
        self._api_versions = list(api_versions)
        self._channel: Any = None

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """The container's (or pod sandbox's) names; None if this runtime knows neither."""
        if not self.socket_path.exists():
            return None  # this runtime is not installed here
        try:
            status = message(self._call("ContainerStatus", string_field(1, container_id)), 1)
        except _NotFound:
            return self._sandbox(container_id)
        name = string(message(status, 2), 1)
        info = info_from_labels(name, string_map_of(status, 12))
        if info.pod and info.namespace:
            return info
        pod, namespace = self._pod_of_container(container_id)
        return ContainerInfo(container=info.container, pod=info.pod or pod, namespace=info.namespace or namespace)

    def _sandbox(self, sandbox_id: str) -> ContainerInfo | None:
        try:
            status = message(self._call("PodSandboxStatus", string_field(1, sandbox_id)), 1)
        except _NotFound:
            return None
        metadata = message(status, 2)
        labels = string_map_of(status, 7)
        return ContainerInfo(
            container=SANDBOX_CONTAINER_NAME,
            pod=string(metadata, 1) or labels.get(POD_NAME, ""),
            namespace=string(metadata, 3) or labels.get(POD_NAMESPACE, ""),
        )

    def _pod_of_container(self, container_id: str) -> tuple[str, str]:
        """Pod name and namespace from the sandbox's metadata, for containers without the kubelet's labels."""
        reply = self._call("ListContainers", message_field(1, string_field(1, container_id)))
        for number, container in fields(reply):
            if number == 1 and isinstance(container, bytes):
                sandbox_id = string(container, 2)
                if sandbox_id:
                    info = self._sandbox(sandbox_id)
                    if info is not None:
                        return info.pod, info.namespace
        return "", ""

    def _call(self, method: str, request: bytes) -> bytes:
        import grpc

        if self._channel is None:
            self._channel = grpc.insecure_channel(f"unix://{self.socket_path}")
        while True:
            stub = self._channel.unary_unary(
                f"/{self._api_versions[0]}.RuntimeService/{method}",
                request_serializer=lambda raw: raw,
                response_deserializer=lambda raw: raw,
            )
            try:
                reply: bytes = stub(request, timeout=self.timeout)
                return reply
            except grpc.RpcError as error:
                code = error.code()
                if code == grpc.StatusCode.UNIMPLEMENTED and len(self._api_versions) > 1:
                    self._api_versions.pop(0)
                    continue
                if code == grpc.StatusCode.NOT_FOUND or (code == grpc.StatusCode.UNKNOWN and _says_not_found(error)):
                    raise _NotFound from error
                raise RuntimeUnavailable(f"{self.name} at {self.socket_path}: {code.name}") from error


def _says_not_found(error: Any) -> bool:
    """Some runtimes answer an unknown id with UNKNOWN and a message instead of NOT_FOUND."""
    details = str(error.details() or "").lower()
    return "not found" in details or "could not find" in details
