"""The /metrics server of agent/web.py over real sockets on 127.0.0.1: slow clients never hold up a scrape."""

from __future__ import annotations

import gc
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric

from agent.web import MetricsServer, serve
from tests.support.scrape import Scrape
from tests.support.web import (
    SlowClients,
    assert_back_to,
    make_certificate,
    open_sockets,
    scrape_curl,
    scrape_urllib,
    settled,
)

TIMEOUT = 2.0  # --web.timeout of these servers
# The timeout while scrapes run beside slow clients: long enough for a few scrapes on a loaded machine, so that
# "answered before the server closed any slow client" tells a held-up scrape from a slow one.
HELD_TIMEOUT = 5.0


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


def registry_with_answer() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    Gauge("test_answer", "A known value to find in every scrape.", registry=registry).set(42)
    return registry


def start(
    max_connections: int, timeout: float, tls: tuple[Path, Path] | None = None, **kwargs: object
) -> MetricsServer:
    return serve(
        registry_with_answer(), "127.0.0.1", 0, max_connections=max_connections, timeout=timeout, tls=tls, **kwargs
    )


def url(server: MetricsServer, tls: bool) -> str:
    return f"{'https' if tls else 'http'}://127.0.0.1:{server.port}/metrics"


def dropped(body: str, reason: str) -> float:
    value = Scrape(body).value("schedwatch_web_connections_dropped_total", reason=reason)
    assert value is not None, f"no dropped-connections series for {reason}"
    return value


def assert_answers(address: str, attempt: int) -> str:
    """One scrape (urllib and curl in turn by *attempt*) answering 42 within the client's 10 s: under a server timeout
    of 30 s, a scrape held up by slow clients would not."""
    body = (scrape_urllib if attempt % 2 == 0 else scrape_curl)(address, 10)[1]
    assert "test_answer 42.0" in body
    return body


def assert_scrapes_beside(clients: SlowClients, address: str, times: int) -> None:
    """Scrape *times* times; each must answer 42 while every slow client is still held.

    A scrape that waited for a slow client could only be answered once the server closed that client (at its
    timeout), so an answer before any close (the server's own count of timeouts in the answer, and what the clients
    saw) proves the scrape was not held up, whatever the machine's load."""
    for attempt in range(times):
        body = assert_answers(address, attempt)
        assert dropped(body, "timeout") == 0, f"scrape {attempt} was answered after the server timed slow clients out"
        closed = [life for life in clients.lifetimes() if life is not None]
        assert not closed, f"scrape {attempt} was answered after slow clients closed: {closed}"


@pytest.mark.parametrize(
    ("kind", "tls"),
    [("idle", False), ("dribble", False), ("idle", True), ("dribble", True), ("tls_stall", True)],
)
def test_slow_clients_neither_delay_scrapes_nor_outlive_the_timeout(
    kind: str, tls: bool, certificate: tuple[Path, Path]
) -> None:
    server = start(16, HELD_TIMEOUT, certificate if tls else None)
    try:
        with SlowClients(server.port, kind, 5, tls=tls) as clients:
            assert_scrapes_beside(clients, url(server, tls), 4)
            lifetimes = clients.wait_all_closed(HELD_TIMEOUT + 3)
            assert clients.answers == []
            if kind == "dribble":
                assert min(clients.bytes_sent) >= 4, "the dribbling clients kept sending until they were closed"
        # Closed by the deadline (not by a stalled read, which a dribbling client never lets happen).
        assert all(life is not None and HELD_TIMEOUT - 0.05 <= life <= HELD_TIMEOUT + 3 for life in lifetimes), (
            lifetimes
        )
        assert dropped(scrape_urllib(url(server, tls))[1], "timeout") == 5
    finally:
        server.stop()


def assert_open_connections(server: MetricsServer, expected: int, timeout: float = 2.0) -> None:
    """Wait until the server holds *expected* connections open; fail if it does not within *timeout*."""
    deadline = time.monotonic() + timeout
    while server.gate.open_count() != expected and time.monotonic() < deadline:
        time.sleep(0.005)
    assert server.gate.open_count() == expected, f"{server.gate.open_count()} connections open, not {expected}"


def test_at_the_bound_the_oldest_unanswered_connection_makes_room() -> None:
    server = start(4, 30.0)
    try:
        baseline = settled(open_sockets)
        with SlowClients(server.port, "idle", 20) as clients:
            for attempt in range(3):
                assert_answers(url(server, False), attempt)
                # A scraper has its answer a moment before the server's thread closes its side: wait for that,
                # so that the next scrape finds this one's slot free (else it evicts one more, as it should).
                assert_open_connections(server, 3)
            lifetimes = clients.wait_all_closed(1.0)
            # 16 evicted to admit the 16 clients after the first 4, and one more for the first scrape; the
            # later scrapes found a free slot (the first scrape's).
            assert [life is not None for life in lifetimes] == [True] * 17 + [False] * 3
            body = scrape_urllib(url(server, False))[1]
            assert dropped(body, "evicted") == 17
            assert dropped(body, "timeout") == dropped(body, "refused") == 0
            assert Scrape(body).value("schedwatch_web_connections_open") == 4  # 3 clients and this scrape
        assert_back_to(open_sockets, baseline, "sockets open in this process")
    finally:
        server.stop()


class BlockingCollector:
    """A collector whose scrape waits until released: connections stay in the middle of being answered."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = threading.Semaphore(0)

    def collect(self) -> Iterator[Metric]:
        self.waiting.release()
        self.release.wait(10)
        yield GaugeMetricFamily("test_released", "1 once the scrape was let through.", value=1)


def test_at_the_bound_with_every_connection_answered_a_new_one_is_closed_at_once() -> None:
    registry = CollectorRegistry(auto_describe=False)
    blocking = BlockingCollector()
    registry.register(blocking)
    server = serve(registry, "127.0.0.1", 0, max_connections=2, timeout=TIMEOUT)
    address = url(server, False)
    results: list[str] = []
    scrapes = [threading.Thread(target=lambda: results.append(scrape_urllib(address)[1])) for _ in range(2)]
    try:
        for thread in scrapes:
            thread.start()
            assert blocking.waiting.acquire(timeout=5)
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as third:
            started = time.monotonic()
            third.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            try:
                answer = third.recv(100)
            except ConnectionResetError:
                answer = b""
            assert answer == b"" and time.monotonic() - started < 0.5, "refused at once"
        blocking.release.set()
        for thread in scrapes:
            thread.join(10)
        assert len(results) == 2 and all("test_released 1.0" in body for body in results)
        assert dropped(results[0], "refused") == 1, "counted when the refusal happened, before these answers"
        assert dropped(results[0], "evicted") == 0
    finally:
        blocking.release.set()
        server.stop()


class LargeCollector:
    """About 8 MB of exposition: more than the kernel buffers between a server and a client that never reads."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("test_large", "Many long series.", labels=["name"])
        for number in range(8):
            family.add_metric([f"{number:0>1000000}"], number)
        yield family


def test_a_client_that_never_reads_its_answer_is_cut_at_the_deadline() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LargeCollector())
    server = serve(registry, "127.0.0.1", 0, max_connections=4, timeout=TIMEOUT)
    try:
        with socket.socket() as reader:
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader.connect(("127.0.0.1", server.port))
            reader.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            sent = time.monotonic()
            while not server.gate.open_count() and time.monotonic() - sent < 5:
                time.sleep(0.001)  # until the server has accepted it
            while server.gate.open_count() and time.monotonic() - sent < TIMEOUT + 5:
                time.sleep(0.02)
            lifetime = time.monotonic() - sent
            assert server.gate.open_count() == 0
            assert TIMEOUT - 0.05 <= lifetime <= TIMEOUT + 1.0, lifetime
            assert server.gate.dropped["timeout"] == 1
            received = reader.recv(1 << 16)
            assert received.startswith(b"HTTP/1.0 200 OK"), "the answer had begun"
    finally:
        server.stop()


def test_a_plain_request_to_the_tls_port_is_counted_and_closed(certificate: tuple[Path, Path]) -> None:
    server = start(4, TIMEOUT, certificate)
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(url(server, False), timeout=5).read()
        assert dropped(scrape_urllib(url(server, True))[1], "tls_handshake_failed") == 1
    finally:
        server.stop()


def test_ipv6_and_basic_auth() -> None:
    server = serve(registry_with_answer(), "::1", 0, max_connections=4, timeout=TIMEOUT, auth=("prometheus", "s3cret"))
    address = f"http://[::1]:{server.port}/metrics"
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(address, timeout=5)
        assert refused.value.code == 401
        _seconds, body = scrape_curl(address.replace("://", "://prometheus:s3cret@"))
        assert "test_answer 42.0" in body
    finally:
        server.stop()


def test_stop_closes_the_listening_socket_and_open_connections() -> None:
    gc.collect()  # what earlier tests dropped closes now, not while this test counts
    baseline = settled(open_sockets)
    server = start(4, 30.0)
    port = server.port
    with SlowClients(port, "idle", 2) as clients:
        assert_answers(url(server, False), 0)
        server.stop()
        assert all(life is not None for life in clients.wait_all_closed(2.0))
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert_back_to(open_sockets, baseline, "sockets open in this process")


class FailingOnce:
    """A collector whose first scrape raises, as a bug in a collector would."""

    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Iterator[Metric]:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("collector bug")
        yield GaugeMetricFamily("test_recovered", "1 after the failed scrape.", value=1)


def test_a_failing_scrape_is_a_500_and_the_server_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FailingOnce())
    server = serve(registry, "127.0.0.1", 0, max_connections=4, timeout=TIMEOUT)
    try:
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(url(server, False), timeout=5)
        assert failed.value.code == 500
        assert "test_recovered 1.0" in scrape_urllib(url(server, False))[1]
    finally:
        server.stop()
    logged = capsys.readouterr()
    assert "answer_failed" in logged.out + logged.err and "collector bug" in logged.out + logged.err


def test_basic_auth_refuses_any_header_bytes_without_failing() -> None:
    """A header holding non-ASCII bytes (latin-1 in WSGI) is a 401, not a 500 from comparing the strings."""
    from agent.web import basic_auth

    statuses: list[str] = []

    def app(environ: dict[str, object], start_response: object) -> list[bytes]:
        return [b"ok"]

    guarded = basic_auth(app, "prom", "s3cret")
    for header in ("Basic \xe9\xe9", "Basic \udcff", "Basic cHJvbTpzM2NyZXQ=", "Digest x", ""):
        body = guarded({"HTTP_AUTHORIZATION": header}, lambda status, headers: statuses.append(status))
        if header == "Basic cHJvbTpzM2NyZXQ=":
            assert body == [b"ok"]
    assert statuses == ["401 Unauthorized"] * 4
