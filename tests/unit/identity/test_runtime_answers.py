"""Runtime answers that are malformed, huge, slow or lying: the clients bound what they read (size and time), the
resolver survives and counts an error, and whatever gets through comes out as valid, bounded label values.

A real runtime cannot be made to answer like this, so the runtimes here are fake servers on unix sockets: an
HTTP one for the Docker API, a gRPC one (raw bytes, encoded by hand) for the CRI.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.identity.labels import MAX_LABEL_LENGTH
from agent.identity.resolver import Identity, IdentityResolver
from agent.identity.runtimes import MAX_ANSWER_BYTES, ContainerInfo, RuntimeAnswerInvalid, RuntimeUnavailable
from agent.identity.runtimes.cri import CriClient
from agent.identity.runtimes.docker import DockerClient
from agent.identity.runtimes.protowire import message_field, string_field, string_map_field
from agent.machine.procfs import ProcFS
from tests.support.stalls import Stalls

ID = "ab" * 32
OTHER = "cd" * 32
TIMEOUT = 0.5  # a runtime that does not answer costs this
ANSWERED = 30.0  # a fake runtime that answers has this long: on a loaded machine its thread may wait for a CPU


class FakeHttpRuntime:
    """A unix-socket server that answers every connection with *answer(connection)*."""

    def __init__(self, path: Path, answer: Callable[[socket.socket], None]) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen(16)
        self.answer = answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):  # the client hangs up on a huge or slow answer, as it should
            connection.recv(65536)  # the request
            self.answer(connection)

    def close(self) -> None:
        self.server.close()


def http(body: bytes, status: str = "200 OK", chunked: bool = False) -> Callable[[socket.socket], None]:
    def answer(connection: socket.socket) -> None:
        if chunked:
            head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            half = len(body) // 2
            parts = [body[:half], body[half:]]
            payload = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"
            connection.sendall(head.encode() + payload)
        else:
            head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            connection.sendall(head.encode() + body)

    return answer


def inspect_json(**overrides: Any) -> bytes:
    document: dict[str, Any] = {"Id": ID, "Name": "/web", "Config": {"Labels": {}}, "State": {"Pid": 4242}}
    document.update(overrides)
    return json.dumps(document).encode()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Callable[[socket.socket], None]], DockerClient]]:
    servers: list[FakeHttpRuntime] = []

    def start(
        answer: Callable[[socket.socket], None], kubelet: bool = False, timeout: float = ANSWERED
    ) -> DockerClient:
        path = tmp_path / f"docker-{len(servers)}.sock"
        servers.append(FakeHttpRuntime(path, answer))
        return DockerClient(path, timeout=timeout, kubelet=kubelet)

    yield start  # type: ignore[misc]
    for server in servers:
        server.close()


def test_a_well_formed_answer_plain_or_chunked(serve: Any) -> None:
    for chunked in (False, True):
        client = serve(http(inspect_json(), chunked=chunked))
        assert client.inspect(ID) == ContainerInfo("web", pid=4242)
    assert serve(http(b'{"message": "no such container"}', "404 Not Found")).inspect(ID) is None


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"\xff\xfe garbage",
        b"[1, 2, 3]",
        inspect_json(Id=OTHER),  # lying: an answer about another container
        inspect_json(Name=12345),
        inspect_json(Config={"Labels": ["io.kubernetes.pod.name=x"]}),
        inspect_json(State={"Pid": "1"}),
        inspect_json(Config="x"),
    ],
)
def test_malformed_or_lying_answers_are_refused(serve: Any, body: bytes) -> None:
    with pytest.raises(RuntimeAnswerInvalid):
        serve(http(body)).inspect(ID)


def test_not_http_is_refused(serve: Any) -> None:
    with pytest.raises(RuntimeAnswerInvalid):
        serve(lambda c: c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")).inspect(ID)


def test_a_huge_answer_is_cut_at_the_bound(serve: Any) -> None:
    chunk, sent = b"x" * 1_000_000, []

    def huge(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n")
        for _ in range(100):  # 100 MB, if anyone read it all
            connection.sendall(chunk)
            sent.append(len(chunk))

    # Time enough to read the bound on a busy machine (this is about size; the timeout has tests of its own).
    with pytest.raises(RuntimeAnswerInvalid, match=str(MAX_ANSWER_BYTES)):
        serve(huge, timeout=30.0).inspect(ID)
    # The client hung up at the bound: the runtime got out no more than the bound, a chunk, and the socket's buffer.
    assert sum(sent) <= MAX_ANSWER_BYTES + 2 * len(chunk), sum(sent)


@pytest.mark.parametrize("kind", ["silent", "drip"])
def test_a_slow_runtime_costs_at_most_the_timeout(serve: Any, kind: str) -> None:
    def slow(connection: socket.socket) -> None:
        if kind == "silent":
            time.sleep(5)
            return
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(50):  # one byte every 0.1 s: each read is quick, the whole answer never comes
            connection.sendall(b" ")
            time.sleep(0.1)

    started, waited = time.monotonic(), Stalls(pids=(os.getpid(),))
    with pytest.raises(RuntimeUnavailable):
        serve(slow, timeout=TIMEOUT).inspect(ID)
    assert time.monotonic() - started < TIMEOUT + 0.3 + waited.seconds()  # and the time it waited for a CPU


def test_kubernetes_labels_only_from_the_kubelets_runtime(serve: Any) -> None:
    labels = {
        "io.kubernetes.pod.name": "payments-0",
        "io.kubernetes.pod.namespace": "kube-system",
        "io.kubernetes.container.name": "api",
    }
    body = inspect_json(Config={"Labels": labels})
    assert serve(http(body)).inspect(ID) == ContainerInfo("web", pid=4242)
    assert serve(http(body), kubelet=True).inspect(ID) == ContainerInfo("api", "payments-0", "kube-system", 4242)


def proc_with(tmp_path: Path, pid: int, cgroup: str) -> ProcFS:
    (tmp_path / "proc" / str(pid)).mkdir(parents=True)
    (tmp_path / "proc" / str(pid) / "cgroup").write_text(f"0::{cgroup}\n")
    return ProcFS(tmp_path / "proc")


def test_resolver_survives_every_bad_answer_and_counts_it(serve: Any, tmp_path: Path) -> None:
    bad = [
        serve(http(b"{not json")),
        serve(http(inspect_json(Id=OTHER))),
        serve(lambda c: time.sleep(5), timeout=TIMEOUT),
    ]
    for index, client in enumerate(bad):
        client.name = f"bad{index}"
    good = serve(http(inspect_json(Name="/" + "n\x1b[2J" * 3000, State={"Pid": 77})))
    proc = proc_with(tmp_path, 77, f"/machine.slice/libpod-{ID}.scope")
    resolver = IdentityResolver([*bad, good], proc=proc)
    identity = resolver.resolve_now(ID)
    assert identity is not None
    assert len(identity.container) <= MAX_LABEL_LENGTH and identity.container.isprintable()
    assert identity.container.endswith("n\\x1b[2J")
    assert identity.anchors == frozenset({f"/machine.slice/libpod-{ID}.scope"})
    counts = resolver.lookup_counts()
    assert counts == {("bad0", "error"): 1, ("bad1", "error"): 1, ("bad2", "error"): 1, ("docker", "ok"): 1}


def test_a_pid_elsewhere_gives_no_anchor(serve: Any, tmp_path: Path) -> None:
    # The runtime named a process that is not in the container's cgroup (a lie, or a pid since reused).
    client = serve(http(inspect_json(State={"Pid": 1})))
    resolver = IdentityResolver([client], proc=proc_with(tmp_path, 1, "/init.scope"))
    assert resolver.resolve_now(ID) == Identity("web", anchors=frozenset())


# --- the CRI over gRPC ------------------------------------------------------------------------------------------


def container_status(container_id: str, name: str, labels: dict[str, str], pid: int = 0) -> bytes:
    status = string_field(1, container_id) + message_field(2, string_field(1, name)) + string_map_field(12, labels)
    info = string_map_field(2, {"info": json.dumps({"pid": pid})}) if pid else b""
    return message_field(1, status) + info


class FakeCri:
    """A gRPC server on a unix socket answering RuntimeService calls with raw bytes the test chooses."""

    def __init__(self, path: Path, answer: Callable[[str, bytes], bytes]) -> None:
        self.server = grpc.server(futures.ThreadPoolExecutor(4))

        def handler(method: str) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(lambda request, context: answer(method, request))

        methods = {m: handler(m) for m in ("ContainerStatus", "PodSandboxStatus", "ListContainers")}
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("runtime.v1.RuntimeService", methods)]
        )
        self.server.add_insecure_port(f"unix://{path}")
        self.server.start()

    def close(self) -> None:
        self.server.stop(None)


@pytest.fixture
def cri(tmp_path: Path) -> Iterator[Callable[[Callable[[str, bytes], bytes]], CriClient]]:
    servers: list[FakeCri] = []

    def start(answer: Callable[[str, bytes], bytes], timeout: float = ANSWERED) -> CriClient:
        path = tmp_path / f"cri-{len(servers)}.sock"
        servers.append(FakeCri(path, answer))
        return CriClient(path, timeout=timeout, api_versions=("runtime.v1",))

    yield start  # type: ignore[misc]
    for server in servers:
        server.close()


def test_cri_answer_with_pid_and_kubelet_labels(cri: Any) -> None:
    labels = {"io.kubernetes.pod.name": "p", "io.kubernetes.pod.namespace": "ns", "io.kubernetes.container.name": "c"}
    client = cri(lambda method, request: container_status(ID, "c", labels, pid=99))
    assert client.inspect(ID) == ContainerInfo("c", "p", "ns", 99)


@pytest.mark.parametrize(
    "reply",
    [
        container_status(OTHER, "c", {}),  # lying: about another container
        b"\xff\xff\xff\xff",  # not protobuf
        message_field(1, b"\x0a\xff\x01"),  # a length past the end
        container_status(ID, "x" * (MAX_ANSWER_BYTES + 10), {}),  # huge
    ],
)
def test_cri_bad_answers_are_refused(cri: Any, reply: bytes) -> None:
    client = cri(lambda method, request: reply)
    with pytest.raises((RuntimeAnswerInvalid, ValueError)):
        client.inspect(ID)


def test_cri_that_never_answers_costs_at_most_the_timeout(cri: Any) -> None:
    def hang(method: str, request: bytes) -> bytes:
        time.sleep(3)
        return b""

    started, waited = time.monotonic(), Stalls(pids=(os.getpid(),))
    with pytest.raises(RuntimeUnavailable):
        cri(hang, timeout=TIMEOUT).inspect(ID)
    assert time.monotonic() - started < TIMEOUT + 0.5 + waited.seconds()  # and the time it waited for a CPU
