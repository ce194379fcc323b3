"""Docker Engine API over its unix socket (Podman serves the same API): GET /containers/{id}/json."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path

from agent.runtimes import ContainerInfo, RuntimeUnavailable, info_from_labels


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class DockerClient:
    """Container names and labels from a Docker-API socket."""

    def __init__(self, socket_path: Path, timeout: float = 1.0, name: str = "docker") -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.name = name

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """Name and io.kubernetes.* labels of *container_id*."""
        if not all(c in "0123456789abcdef" for c in container_id):
            return None  # never put anything but a hex id into a URL
        if not self.socket_path.exists():
            return None  # this runtime is not installed here
        connection = _UnixConnection(str(self.socket_path), self.timeout)
        try:
            connection.request("GET", f"/containers/{container_id}/json")
            response = connection.getresponse()
            body = response.read()
        except OSError as error:
            raise RuntimeUnavailable(f"{self.name} at {self.socket_path}: {error}") from error
        finally:
            connection.close()
        if response.status == 404:
            return None
        if response.status != 200:
            raise RuntimeUnavailable(f"{self.name} at {self.socket_path}: HTTP {response.status}")
        document = json.loads(body)
        labels = (document.get("Config") or {}).get("Labels") or {}
        return info_from_labels(str(document.get("Name", "")).lstrip("/"), labels)
