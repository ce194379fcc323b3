"""A kubelet stand-in for the container tests: creates pods and containers through the CRI, as the kubelet does.

Only what the tests need: host-network pods under a kubelet-style cgroup parent, containers with bind mounts, the
labels the kubelet puts on sandboxes and containers. Messages are encoded with the agent's own protowire helpers.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from agent.identity.runtimes.protowire import message_field, string, string_field, string_map_field, varint_field

SERVICE = "/runtime.v1.RuntimeService/"
NAMESPACE_MODE_NODE = 2
NAMESPACE_MODE_CONTAINER = 1


@dataclass
class Pod:
    """A pod sandbox as the kubelet would describe it."""

    name: str
    namespace: str
    qos_class: str = "burstable"
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    sandbox_id: str = ""

    @property
    def cgroup_parent(self) -> str:
        """The kubelet's cgroupfs-driver parent: /kubepods/<qos>/pod<uid> (guaranteed pods sit right under kubepods)."""
        qos = "" if self.qos_class == "guaranteed" else f"/{self.qos_class}"
        return f"/kubepods{qos}/pod{self.uid}"

    def labels(self) -> dict[str, str]:
        return {
            "io.kubernetes.pod.name": self.name,
            "io.kubernetes.pod.namespace": self.namespace,
            "io.kubernetes.pod.uid": self.uid,
        }

    def config(self) -> bytes:
        metadata = string_field(1, self.name) + string_field(2, self.uid) + string_field(3, self.namespace)
        namespaces = varint_field(1, NAMESPACE_MODE_NODE) + varint_field(2, NAMESPACE_MODE_CONTAINER)
        linux = string_field(1, self.cgroup_parent) + message_field(2, message_field(1, namespaces))
        return message_field(1, metadata) + string_map_field(6, self.labels()) + message_field(8, linux)


class CriDriver:
    """Pods and containers through a runtime's CRI socket (runtime.v1)."""

    def __init__(self, socket_path: Path, timeout: float = 30.0) -> None:
        self._channel = grpc.insecure_channel(f"unix://{socket_path}")
        self._timeout = timeout
        self._created: list[str] = []
        self._pods: list[Pod] = []

    def _call(self, method: str, request: bytes) -> bytes:
        stub: Any = self._channel.unary_unary(
            SERVICE + method, request_serializer=lambda raw: raw, response_deserializer=lambda raw: raw
        )
        reply: bytes = stub(request, timeout=self._timeout)
        return reply

    def run_pod(self, pod: Pod) -> str:
        """RunPodSandbox; returns the sandbox id (also stored on *pod*)."""
        reply = self._call("RunPodSandbox", message_field(1, pod.config()))
        pod.sandbox_id = _required(string(reply, 1), "RunPodSandbox")
        self._pods.append(pod)
        return pod.sandbox_id

    def start_container(
        self,
        pod: Pod,
        name: str,
        image: str,
        command: list[str],
        mounts: dict[str, str] | None = None,
        kubelet_labels: bool = True,
    ) -> str:
        """CreateContainer + StartContainer (with the kubelet's labels unless told not to); returns the id."""
        labels = {**pod.labels(), "io.kubernetes.container.name": name} if kubelet_labels else {}
        config = message_field(1, string_field(1, name)) + message_field(2, string_field(1, image))
        config += b"".join(string_field(3, part) for part in command)
        for host_path, container_path in (mounts or {}).items():
            config += message_field(
                7, string_field(1, container_path) + string_field(2, host_path) + varint_field(3, 1)
            )
        config += string_map_field(9, labels)
        request = string_field(1, pod.sandbox_id) + message_field(2, config) + message_field(3, pod.config())
        container_id = _required(string(self._call("CreateContainer", request), 1), "CreateContainer")
        self._created.append(container_id)
        self._call("StartContainer", string_field(1, container_id))
        return container_id

    def close(self) -> None:
        """Remove every container and pod this driver created."""
        for container_id in self._created:
            try:
                self._call("StopContainer", string_field(1, container_id))
                self._call("RemoveContainer", string_field(1, container_id))
            except grpc.RpcError:
                pass
        for pod in self._pods:
            try:
                self._call("StopPodSandbox", string_field(1, pod.sandbox_id))
                self._call("RemovePodSandbox", string_field(1, pod.sandbox_id))
            except grpc.RpcError:
                pass
            remove_pod_cgroups(pod)
        self._channel.close()


def remove_pod_cgroups(pod: Pod) -> None:
    """What the kubelet does after the runtime removed a pod: its pod<uid> cgroup, in every hierarchy."""
    for hierarchy in [Path("/sys/fs/cgroup"), *Path("/sys/fs/cgroup").iterdir()]:
        pod_dir = hierarchy / pod.cgroup_parent.lstrip("/")
        if pod_dir.is_dir():
            with contextlib.suppress(OSError):
                pod_dir.rmdir()


def _required(value: str, call: str) -> str:
    if not value:
        raise ValueError(f"{call} answered without an id")
    return value
