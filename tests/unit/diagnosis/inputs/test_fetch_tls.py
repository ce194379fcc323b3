"""diagnose --from behind TLS and basic auth, against real servers on 127.0.0.1: the agent's own /metrics server
(agent/web.py, TLS and basic auth) and a server that asks for a client certificate (mutual TLS); certificates made
by openssl. What goes wrong is one line saying what to give."""

from __future__ import annotations

import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge

from agent.diagnosis.inputs.live import fetch
from agent.diagnosis.inputs.live.fleet import PrometheusSource
from agent.diagnosis.inputs.live.sources import AgentSource, SourceError
from agent.web import serve
from tests.support.tls import Pair, issue, make_ca

USER, PASSWORD = "prometheus", "s3cret"
BODY = "test_answer 42.0"


@dataclass(frozen=True)
class Certificates:
    ca: Pair
    other_ca: Pair  # trusted by nobody here
    server: Pair  # for 127.0.0.1 and the name schedwatch
    named: Pair  # for the name schedwatch only
    client: Pair
    stranger: Pair  # a client certificate of the other CA
    password: Path
    wrong_password: Path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    directory = tmp_path_factory.mktemp("tls")
    ca, other = make_ca(directory / "ca"), make_ca(directory / "other", "other-ca")
    password, wrong = directory / "password", directory / "wrong"
    password.write_text(f"{PASSWORD}\n")
    wrong.write_text("guess\n")
    return Certificates(
        ca,
        other,
        issue(ca, directory, "server", "DNS:schedwatch,IP:127.0.0.1"),
        issue(ca, directory, "named", "DNS:schedwatch"),
        issue(ca, directory, "client", usage="clientAuth"),
        issue(other, directory, "stranger", usage="clientAuth"),
        password,
        wrong,
    )


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    Gauge("test_answer", "A known value.", registry=registry).set(42)
    return registry


@pytest.fixture(scope="module")
def agent_server(certs: Certificates) -> Iterator[str]:
    """The agent's /metrics server with TLS and basic auth, as the tls-auth overlay runs it."""
    server = serve(
        _registry(),
        "127.0.0.1",
        0,
        max_connections=8,
        timeout=5.0,
        tls=(certs.server.cert, certs.server.key),
        auth=(USER, PASSWORD),
    )
    yield f"https://127.0.0.1:{server.port}/metrics"
    server.stop()


@pytest.fixture(scope="module")
def named_server(certs: Certificates) -> Iterator[str]:
    """The agent's server with a certificate naming schedwatch, not 127.0.0.1."""
    server = serve(_registry(), "127.0.0.1", 0, max_connections=8, timeout=5.0, tls=(certs.named.cert, certs.named.key))
    yield f"https://127.0.0.1:{server.port}/metrics"
    server.stop()


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"{BODY}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _MutualServer(http.server.ThreadingHTTPServer):
    """Requires a client certificate signed by the test CA. A refused client gets the TLS alert, and its request is
    read before the connection closes: closing over unread data would send a reset that can overtake the alert."""

    context: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        tls = self.context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
        except ssl.SSLError:
            tls.shutdown(socket.SHUT_WR)  # the alert is out; now plain TCP
            tls.settimeout(10)
            while tls.recv(4096):
                pass
            return
        super().finish_request(tls, client_address)


@pytest.fixture
def mutual_server(certs: Certificates) -> Iterator[str]:
    """A TLS server that requires a client certificate signed by the test CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server.cert, certs.server.key)
    context.load_verify_locations(cafile=str(certs.ca.cert))
    context.verify_mode = ssl.CERT_REQUIRED
    server = _MutualServer(("127.0.0.1", 0), _Answer)
    server.context = context
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def one_line(error: pytest.ExceptionInfo[SourceError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_the_ca_and_basic_auth_read_the_agent_server(agent_server: str, certs: Certificates) -> None:
    client = fetch.make_client(ca_file=certs.ca.cert, user=USER, password_file=certs.password)
    assert BODY in fetch.get(agent_server, 10, 1 << 20, client=client).decode()


def test_without_the_ca_the_line_says_to_give_it(agent_server: str, certs: Certificates) -> None:
    client = fetch.make_client(user=USER, password_file=certs.password)
    with pytest.raises(SourceError) as error:
        AgentSource(agent_server, client=client).read()
    assert one_line(error) == (
        f"{agent_server}: its certificate cannot be verified with the system's CAs (unable to get local issuer "
        "certificate): give the CA that signed it with --from.tls-ca-file"
    )


def test_another_ca_is_named_in_the_line(agent_server: str, certs: Certificates) -> None:
    client = fetch.make_client(ca_file=certs.other_ca.cert)
    with pytest.raises(SourceError) as error:
        AgentSource(agent_server, client=client).read()
    assert one_line(error) == (
        f"{agent_server}: its certificate is not signed by a CA in {certs.other_ca.cert} (unable to get local "
        "issuer certificate): give the CA that signed it with --from.tls-ca-file"
    )


def test_a_wrong_password_is_401_naming_the_user_and_the_file(agent_server: str, certs: Certificates) -> None:
    client = fetch.make_client(ca_file=certs.ca.cert, user=USER, password_file=certs.wrong_password)
    with pytest.raises(SourceError) as error:
        AgentSource(agent_server, client=client).read()
    assert one_line(error) == (
        f"{agent_server} answered HTTP 401 Unauthorized: it does not accept user 'prometheus' with the password in "
        f"{certs.wrong_password}: check both against what the server expects"
    )


def test_no_credentials_is_401_saying_which_flags_to_give(agent_server: str, certs: Certificates) -> None:
    with pytest.raises(SourceError) as error:
        AgentSource(agent_server, client=fetch.make_client(ca_file=certs.ca.cert)).read()
    assert one_line(error) == (
        f"{agent_server} answered HTTP 401 Unauthorized: it wants HTTP basic auth: give --from.basic-auth-user and "
        "--from.basic-auth-password-file (or their SCHEDWATCH_FROM_* variables)"
    )


def test_a_prometheus_source_says_the_same(agent_server: str, certs: Certificates) -> None:
    base = agent_server.removesuffix("/metrics")
    client = fetch.make_client(ca_file=certs.ca.cert, user=USER, password_file=certs.wrong_password)
    with pytest.raises(SourceError) as error:
        PrometheusSource(f"prometheus+{base}", client=client).query("up")
    assert one_line(error).startswith(f"{base} answered HTTP 401 Unauthorized: it does not accept user 'prometheus'")
    with pytest.raises(SourceError) as error:
        PrometheusSource(f"prometheus+{base}").query("up")
    assert one_line(error).startswith(f"Prometheus at {base}: its certificate cannot be verified")


def test_a_certificate_for_another_name_needs_the_server_name(named_server: str, certs: Certificates) -> None:
    with pytest.raises(SourceError) as error:
        AgentSource(named_server, client=fetch.make_client(ca_file=certs.ca.cert)).read()
    assert one_line(error) == (
        f"{named_server}: its certificate is not for the host in --from (IP address mismatch, certificate is not "
        "valid for '127.0.0.1'.): connect by a name the certificate carries, or give that name with "
        "--from.tls-server-name"
    )
    client = fetch.make_client(ca_file=certs.ca.cert, server_name="schedwatch")
    assert BODY in fetch.get(named_server, 10, 1 << 20, client=client).decode()


def test_plain_http_to_a_tls_agent_says_to_use_https(agent_server: str) -> None:
    plain = agent_server.replace("https://", "http://")
    with pytest.raises(SourceError) as error:
        AgentSource(plain).read()
    message = one_line(error)
    assert message.startswith(f"cannot reach {plain}: ")
    assert message.endswith("; if the agent serves TLS (its --web.tls-cert-file), use https://")


def test_https_to_a_plain_server_says_it_does_not_speak_tls() -> None:
    server = serve(_registry(), "127.0.0.1", 0, max_connections=8, timeout=5.0)
    url = f"https://127.0.0.1:{server.port}/metrics"
    try:
        with pytest.raises(SourceError) as error:
            AgentSource(url).read()
    finally:
        server.stop()
    assert one_line(error) == (
        f"{url}: it does not speak TLS there (WRONG_VERSION_NUMBER): use http:// if it serves plain HTTP"
    )


def test_mutual_tls_with_the_client_certificate(mutual_server: str, certs: Certificates) -> None:
    client = fetch.make_client(ca_file=certs.ca.cert, cert_file=certs.client.cert, key_file=certs.client.key)
    assert BODY in fetch.get(mutual_server, 10, 1 << 20, client=client).decode()


def test_a_server_asking_for_a_certificate_says_which_flags_give_one(mutual_server: str, certs: Certificates) -> None:
    with pytest.raises(SourceError) as error:
        AgentSource(mutual_server, client=fetch.make_client(ca_file=certs.ca.cert)).read()
    assert one_line(error) == (
        f"{mutual_server}: it asks for a client certificate (TLSV13_ALERT_CERTIFICATE_REQUIRED): give one it trusts "
        "with --from.tls-cert-file and --from.tls-key-file"
    )


def test_a_refused_client_certificate_is_named(mutual_server: str, certs: Certificates) -> None:
    client = fetch.make_client(ca_file=certs.ca.cert, cert_file=certs.stranger.cert, key_file=certs.stranger.key)
    with pytest.raises(SourceError) as error:
        AgentSource(mutual_server, client=client).read()
    assert one_line(error) == (
        f"{mutual_server}: it refused the client certificate in {certs.stranger.cert} (TLSV1_ALERT_UNKNOWN_CA): "
        "give one signed by a CA the server trusts"
    )


def test_unusable_client_files_are_one_line_each(certs: Certificates, tmp_path: Path) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cases = [
        (
            {"ca_file": not_pem},
            f"--from.tls-ca-file {not_pem}: no PEM certificate in it (NO_CERTIFICATE_OR_CRL_FOUND)",
        ),
        ({"ca_file": tmp_path / "absent.pem"}, f"--from.tls-ca-file {tmp_path / 'absent.pem'}: cannot read it"),
        (
            {"cert_file": certs.client.cert, "key_file": certs.server.key},
            f"--from.tls-cert-file {certs.client.cert} and --from.tls-key-file {certs.server.key}: the key is not "
            "the certificate's (KEY_VALUES_MISMATCH)",
        ),
        (
            {"user": USER, "password_file": tmp_path / "absent"},
            f"--from.basic-auth-password-file {tmp_path / 'absent'}: cannot read it (No such file or directory)",
        ),
        ({"user": USER, "password_file": empty}, f"--from.basic-auth-password-file {empty} is empty"),
    ]
    for options, message in cases:
        with pytest.raises(fetch.ClientError) as error:
            fetch.make_client(**options)  # type: ignore[arg-type]
        assert str(error.value).startswith(message), (options, str(error.value))
        assert "\n" not in str(error.value)
