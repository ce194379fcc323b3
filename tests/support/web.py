"""Clients for testing the /metrics server: a TLS certificate, timed scrapes, and slow clients that hold connections."""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

REQUEST_LINE = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
KINDS = ("idle", "dribble", "tls_stall")


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files in *directory*), made by openssl."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def insecure_context() -> ssl.SSLContext:
    """A client context that accepts any certificate (like `curl -k`)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA store to load: nothing is verified
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def client_hello() -> bytes:
    """The first flight of a real TLS client (its ClientHello), produced by Python's ssl without a socket."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = insecure_context().wrap_bio(incoming, outgoing)
    with contextlib.suppress(ssl.SSLWantReadError):  # it waits for the server's answer, which never comes
        client.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16", "not a TLS handshake record"
    return hello


def scrape_urllib(url: str, timeout: float = 10.0) -> tuple[float, str]:
    """(seconds, body) of one GET by urllib; over https without checking the certificate."""
    started = time.monotonic()
    context = insecure_context() if url.startswith("https") else None
    with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
        assert response.status == 200
        body = response.read().decode()
    return time.monotonic() - started, body


def scrape_curl(url: str, timeout: float = 10.0) -> tuple[float, str]:
    """(seconds, body) of one GET by `curl -k`, which fails on any HTTP or connection error."""
    started = time.monotonic()
    result = subprocess.run(
        ["curl", "-k", "-sS", "--fail", "--max-time", str(timeout), url], capture_output=True, text=True
    )
    assert result.returncode == 0, f"curl failed ({result.returncode}): {result.stderr}"
    return time.monotonic() - started, result.stdout


def open_sockets(pid: int | str = "self") -> int:
    """Sockets the process holds now (its listeners and connections: what a client can leave open). Other
    descriptors come and go with the agent's own work: files of cgroups it reads, closed while they are idle."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except FileNotFoundError:
            continue  # closed since the listing
    return count


def threads(pid: int | str = "self") -> int:
    """Threads the process runs now."""
    return len(os.listdir(f"/proc/{pid}/task"))


def settled(count: Callable[[], int], quiet: float = 0.5, limit: float = 5.0) -> int:
    """*count()* once it has not changed for *quiet* seconds (a connection the client is done with may take the
    server a moment to close)."""
    value, since, deadline = count(), time.monotonic(), time.monotonic() + limit
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.05)
        now = count()
        if now != value:
            value, since = now, time.monotonic()
    return value


def assert_back_to(count: Callable[[], int], baseline: int, what: str, limit: float = 5.0) -> None:
    """Wait up to *limit* s for *count()* to be *baseline* again."""
    deadline = time.monotonic() + limit
    while count() != baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert count() == baseline, f"{count()} {what}, {baseline} before"


class SlowClients:
    """*count* connections to 127.0.0.1:*port* that never complete a request, and when the server closed each.

    Kinds: ``idle`` connects and sends nothing; ``dribble`` sends a request line one byte every *interval* seconds
    (over TLS after a full handshake when *tls*); ``tls_stall`` sends the first half of a real ClientHello and
    stalls mid-handshake. One thread sends and watches for the server's close, for at most *limit* seconds.
    """

    def __init__(
        self, port: int, kind: str, count: int, tls: bool = False, interval: float = 0.2, limit: float = 30.0
    ) -> None:
        assert kind in KINDS
        self.port, self.kind, self.count, self.tls = port, kind, count, tls
        self.interval, self.limit = interval, limit
        self.sockets: list[socket.socket] = []
        self.opened: list[float] = []
        self.closed: list[float | None] = []
        self.bytes_sent: list[int] = []
        self.answers: list[bytes] = []  # anything the server sent on these connections (it should send nothing)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SlowClients:
        hello = client_hello() if self.kind == "tls_stall" else b""
        for _ in range(self.count):
            connecting = time.monotonic()  # the server's clock for this connection starts about now
            sock: socket.socket = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            if self.kind == "dribble" and self.tls:
                sock = insecure_context().wrap_socket(sock)
            if hello:
                sock.sendall(hello[: len(hello) // 2])
            sock.setblocking(False)
            with self._lock:
                self.sockets.append(sock)
                self.opened.append(connecting)
                self.closed.append(None)
                self.bytes_sent.append(len(hello) // 2)
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()

    def lifetimes(self) -> list[float | None]:
        """Seconds from connecting until the server closed each connection; None while it is open."""
        with self._lock:
            return [None if end is None else end - start for start, end in zip(self.opened, self.closed, strict=True)]

    def wait_all_closed(self, timeout: float) -> list[float | None]:
        """Wait up to *timeout* s for the server to close every connection; return the lifetimes either way."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and None in self.lifetimes():
            time.sleep(0.02)
        return self.lifetimes()

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        for index, sock in enumerate(self.sockets):
            selector.register(sock, selectors.EVENT_READ, index)
        ends = time.monotonic() + self.limit
        next_byte = time.monotonic()
        while not self._stop.is_set() and time.monotonic() < ends and selector.get_map():
            if self.kind == "dribble" and time.monotonic() >= next_byte:
                next_byte += self.interval
                for key in list(selector.get_map().values()):
                    self._send_next_byte(key.data, selector)
            for key, _events in selector.select(timeout=0.01):
                self._check_closed(key.data, selector)
        selector.close()

    def _send_next_byte(self, index: int, selector: selectors.BaseSelector) -> None:
        sent = self.bytes_sent[index]
        if sent >= len(REQUEST_LINE) - 1:  # never the final byte: the request must stay incomplete
            return
        try:
            self.sockets[index].send(REQUEST_LINE[sent : sent + 1])
            self.bytes_sent[index] = sent + 1
        except (ssl.SSLWantWriteError, BlockingIOError):
            pass
        except OSError:
            self._mark_closed(index, selector)

    def _check_closed(self, index: int, selector: selectors.BaseSelector) -> None:
        try:
            data = self.sockets[index].recv(4096)
        except (ssl.SSLWantReadError, BlockingIOError):
            return
        except OSError:
            data = b""
        if data:
            self.answers.append(data)
            return
        self._mark_closed(index, selector)

    def _mark_closed(self, index: int, selector: selectors.BaseSelector) -> None:
        with self._lock:
            self.closed[index] = time.monotonic()
        selector.unregister(self.sockets[index])
