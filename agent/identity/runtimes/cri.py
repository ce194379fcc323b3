"""The kubelet's Container Runtime Interface (containerd's CRI plugin, CRI-O) over gRPC.

ContainerStatus gives the container's name (its CRI metadata) and the labels the kubelet set on it
(io.kubernetes.pod.name, ...). An id the runtime does not know as a container may be a pod sandbox (the pause
container, whose cgroup holds the pod's infra process): PodSandboxStatus then gives the pod, and the container is
named "POD" as the kubelet names it. Runtimes older than runtime.v1 (containerd < 1.6, CRI-O < 1.23) serve the
same messages as runtime.v1alpha2; the first call that gets UNIMPLEMENTED switches to it for good.

The CRI is the kubelet's own runtime: its pod and namespace names are trusted. Each status is asked for verbose,
only for the pid of the container's (or sandbox's) process in its JSON info (nothing else of it is kept or logged);
the agent checks through that pid that a cgroup named after the container is the container's.

Messages are encoded by hand (agent.identity.runtimes.protowire); of each reply only ids, metadata, labels and
that pid are read, and a reply longer than MAX_ANSWER_BYTES is refused by the channel.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.identity.runtimes import (
    MAX_ANSWER_BYTES,
    POD_NAME,
    POD_NAMESPACE,
    ContainerInfo,
    RuntimeAnswerInvalid,
    RuntimeUnavailable,
    info_from_labels,
    worth_asking,
)
from agent.identity.runtimes.protowire import (
    fields,
    message,
    message_field,
    string,
    string_field,
    string_map_of,
    varint_field,
)

API_VERSIONS = ("runtime.v1", "runtime.v1alpha2")
SANDBOX_CONTAINER_NAME = "POD"

# ContainerStatusRequest{container_id = 1, verbose = 2}, PodSandboxStatusRequest{pod_sandbox_id = 1, verbose = 2}
# ContainerStatusResponse{status = 1, info = 2} -> ContainerStatus{id = 1, metadata = 2 {name = 1}, labels = 12}
# PodSandboxStatusResponse{status = 1, info = 2} -> PodSandboxStatus{id = 1, metadata = 2 {name = 1, namespace = 3}}
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
        if not worth_asking(self.socket_path, container_id):
            return None
        try:
            reply = self._call("ContainerStatus", string_field(1, container_id) + varint_field(2, 1))
        except _NotFound:
            return self._sandbox(container_id)
        status = message(reply, 1)
        _check_id(self.name, container_id, string(status, 1))
        name = string(message(status, 2), 1)
        info = info_from_labels(name, string_map_of(status, 12), kubelet=True, pid=_verbose_pid(reply))
        if info.pod and info.namespace:
            return info
        pod, namespace = self._pod_of_container(container_id)
        return ContainerInfo(info.container, info.pod or pod, info.namespace or namespace, info.pid)

    def _sandbox(self, sandbox_id: str) -> ContainerInfo | None:
        try:
            reply = self._call("PodSandboxStatus", string_field(1, sandbox_id) + varint_field(2, 1))
        except _NotFound:
            return None
        status = message(reply, 1)
        _check_id(self.name, sandbox_id, string(status, 1))
        metadata = message(status, 2)
        labels = string_map_of(status, 7)
        return ContainerInfo(
            container=SANDBOX_CONTAINER_NAME,
            pod=string(metadata, 1) or labels.get(POD_NAME, ""),
            namespace=string(metadata, 3) or labels.get(POD_NAMESPACE, ""),
            pid=_verbose_pid(reply),
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
            self._channel = grpc.insecure_channel(
                f"unix://{self.socket_path}", options=[("grpc.max_receive_message_length", MAX_ANSWER_BYTES)]
            )
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
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise RuntimeAnswerInvalid(f"{self.name}: answer longer than {MAX_ANSWER_BYTES} bytes") from error
                if code == grpc.StatusCode.NOT_FOUND or (code == grpc.StatusCode.UNKNOWN and _says_not_found(error)):
                    raise _NotFound from error
                raise RuntimeUnavailable(f"{self.name} at {self.socket_path}: {code.name}") from error


def _says_not_found(error: Any) -> bool:
    """Some runtimes answer an unknown id with UNKNOWN and a message instead of NOT_FOUND."""
    details = str(error.details() or "").lower()
    return "not found" in details or "could not find" in details


def _check_id(runtime: str, asked: str, answered: str) -> None:
    if answered != asked:
        raise RuntimeAnswerInvalid(f"{runtime}: asked for {asked}, answered about {answered[:80]!r}")


def _verbose_pid(reply: bytes) -> int:
    """The process id in a verbose status's JSON info (containerd and CRI-O put it there); 0 if absent."""
    info = string_map_of(reply, 2).get("info", "")
    try:
        pid = json.loads(info).get("pid", 0) if info else 0
    except (ValueError, AttributeError):
        return 0
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else 0
