"""containerd's own API over gRPC (containers.v1.Containers/Get): the labels the kubelet's CRI plugin sets.

Messages are encoded by hand (agent.identity.runtimes.protowire): the request is one string field, and of the reply
only the container's id and labels are read, then the pid of its task (Tasks/Get), through which the agent checks
that a cgroup named after the container is the container's. The io.kubernetes.* labels are taken only in the
namespace of containerd's CRI plugin (k8s.io), where the kubelet made them (see docs/identity.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.identity.runtimes import (
    MAX_ANSWER_BYTES,
    ContainerInfo,
    RuntimeAnswerInvalid,
    RuntimeUnavailable,
    info_from_labels,
    worth_asking,
)
from agent.identity.runtimes.protowire import fields, message, string, string_field, string_map_of

GET_CONTAINER = "/containerd.services.containers.v1.Containers/Get"
GET_TASK = "/containerd.services.tasks.v1.Tasks/Get"
KUBELET_NAMESPACE = "k8s.io"  # the CRI plugin's namespace


class ContainerdClient:
    """Container labels from containerd, searched in each configured namespace."""

    name = "containerd"

    def __init__(self, socket_path: Path, namespaces: Sequence[str], timeout: float = 1.0) -> None:
        self.socket_path = socket_path
        self.namespaces = list(namespaces)
        self.timeout = timeout
        self._channel: Any = None

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """The container's labels in the first namespace that knows it."""
        if not worth_asking(self.socket_path, container_id):
            return None
        for namespace in self.namespaces:
            # GetContainerResponse{container = 1} -> Container{id = 1, labels = 2}
            reply = self._call(GET_CONTAINER, container_id, namespace)
            if reply is None:
                continue
            container = message(reply, 1)
            if string(container, 1) != container_id:
                raise RuntimeAnswerInvalid(f"{self.name}: asked for {container_id}, answered about another id")
            labels = string_map_of(container, 2)
            return info_from_labels("", labels, namespace == KUBELET_NAMESPACE, self._task_pid(container_id, namespace))
        return None

    def _task_pid(self, container_id: str, namespace: str) -> int:
        """The pid of the container's task (GetResponse{process = 1 {pid = 3}}); 0 if it has none."""
        reply = self._call(GET_TASK, container_id, namespace)
        if reply is None:
            return 0
        for number, value in fields(message(reply, 1)):
            if number == 3 and isinstance(value, int):
                return value
        return 0

    def _call(self, method: str, container_id: str, namespace: str) -> bytes | None:
        """One call with the container id as field 1; None when the namespace does not know it."""
        import grpc

        if self._channel is None:
            self._channel = grpc.insecure_channel(
                f"unix://{self.socket_path}", options=[("grpc.max_receive_message_length", MAX_ANSWER_BYTES)]
            )
        stub = self._channel.unary_unary(
            method, request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw
        )
        try:
            reply: bytes = stub(
                string_field(1, container_id), metadata=[("containerd-namespace", namespace)], timeout=self.timeout
            )
            return reply
        except grpc.RpcError as error:
            code = error.code()
            if code == grpc.StatusCode.NOT_FOUND:
                return None
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise RuntimeAnswerInvalid(f"{self.name}: answer longer than {MAX_ANSWER_BYTES} bytes") from error
            raise RuntimeUnavailable(f"containerd at {self.socket_path}: {code.name}") from error
