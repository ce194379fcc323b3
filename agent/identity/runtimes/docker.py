"""Docker Engine API over its unix socket (Podman serves the same API): GET /containers/{id}/json."""

from __future__ import annotations

import json
import socket
import time
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

_CHUNK = 65536


class DockerClient:
    """Container names (and, for the kubelet's runtime, Kubernetes labels) from a Docker-API socket.

    *kubelet*: this Docker is the kubelet's runtime (cri-dockerd, dockershim), so the io.kubernetes.* labels on
    its containers were set by the kubelet; otherwise any user of the socket could have set them, and they are
    ignored.
    """

    def __init__(self, socket_path: Path, timeout: float = 1.0, name: str = "docker", kubelet: bool = False) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.name = name
        self.kubelet = kubelet

    def inspect(self, container_id: str) -> ContainerInfo | None:
        """Name, one process and (for the kubelet's runtime) io.kubernetes.* labels of *container_id*."""
        if not worth_asking(self.socket_path, container_id):
            return None
        status, body = self._get(f"/containers/{container_id}/json")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeUnavailable(f"{self.name} at {self.socket_path}: HTTP {status}")
        return self._info(container_id, body)

    def _get(self, url: str) -> tuple[int, bytes]:
        """One HTTP/1.0 GET: the whole exchange within the timeout, at most MAX_ANSWER_BYTES read."""
        deadline = time.monotonic() + self.timeout
        chunks, total = [], 0
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(str(self.socket_path))
                sock.sendall(f"GET {url} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"no whole answer in {self.timeout}s")
                    sock.settimeout(left)
                    chunk = sock.recv(_CHUNK)
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > MAX_ANSWER_BYTES + _CHUNK:
                        raise RuntimeAnswerInvalid(f"{self.name}: answer longer than {MAX_ANSWER_BYTES} bytes")
                    chunks.append(chunk)
        except OSError as error:
            raise RuntimeUnavailable(f"{self.name} at {self.socket_path}: {error}") from error
        return _parse_response(self.name, b"".join(chunks))

    def _info(self, container_id: str, body: bytes) -> ContainerInfo:
        try:
            document = json.loads(body)
        except ValueError as error:  # not JSON, or not UTF-8
            raise RuntimeAnswerInvalid(f"{self.name}: not JSON: {error}") from error
        if not isinstance(document, dict):
            raise RuntimeAnswerInvalid(f"{self.name}: answer is not an object")
        if document.get("Id") != container_id:
            raise RuntimeAnswerInvalid(f"{self.name}: asked for {container_id}, answered about another id")
        name = _typed(document.get("Name", ""), str, "Name")
        config = _typed(document.get("Config") or {}, dict, "Config")
        labels = _typed(config.get("Labels") or {}, dict, "Config.Labels")
        state = _typed(document.get("State") or {}, dict, "State")
        pid = _typed(state.get("Pid", 0), int, "State.Pid")
        strings = {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
        return info_from_labels(name.lstrip("/"), strings, self.kubelet, pid if pid > 0 else 0)


def _typed(value: Any, kind: type, field: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RuntimeAnswerInvalid(f"{field} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _parse_response(runtime: str, raw: bytes) -> tuple[int, bytes]:
    """(status, body) of a whole HTTP/1.x answer (chunked or not)."""
    head, separator, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if not separator or len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise RuntimeAnswerInvalid(f"{runtime}: not an HTTP answer")
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(b":")
        headers[key.strip().lower()] = value.strip().lower()
    if headers.get(b"transfer-encoding") == b"chunked":
        body = _unchunked(runtime, body)
    return int(parts[1]), body


def _unchunked(runtime: str, body: bytes) -> bytes:
    out: list[bytes] = []
    offset = 0
    while True:
        end = body.find(b"\r\n", offset)
        size_text = body[offset:end].split(b";")[0].strip() if end >= 0 else b""
        try:
            size = int(size_text, 16)
        except ValueError as error:
            raise RuntimeAnswerInvalid(f"{runtime}: malformed chunked answer") from error
        if size == 0:
            return b"".join(out)
        start = end + 2
        if start + size > len(body):
            raise RuntimeAnswerInvalid(f"{runtime}: truncated chunked answer")
        out.append(body[start : start + size])
        offset = start + size + 2
