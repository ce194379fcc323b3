"""One HTTP GET with a deadline on the whole exchange, for diagnose's --from sources, over TLS and with basic auth
when the server wants them.

urllib's timeout bounds each socket operation, not the request: a server that trickles its answer a byte at a
time keeps a read going for ever. The GET runs in a daemon thread that is abandoned at the deadline (diagnose is a
command that exits soon after; the thread ends with the process or at its next socket timeout).

A :class:`Client` says how to reach the server: the CA its certificate must be signed by, the name it must carry,
a client certificate for a server that asks for one (mutual TLS), and basic-auth credentials. What goes wrong
there (a certificate that cannot be verified, a client certificate refused, HTTP 401) is one line saying what to
give: :func:`tls_problem` and :func:`refusal`.
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# The alerts a TLS server sends when it wanted a client certificate and got none, or refused the one it got.
CERTIFICATE_REQUIRED = {"TLSV13_ALERT_CERTIFICATE_REQUIRED"}
CERTIFICATE_REFUSED = {
    "SSLV3_ALERT_BAD_CERTIFICATE",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED",
    "SSLV3_ALERT_CERTIFICATE_REVOKED",
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
    "TLSV1_ALERT_UNKNOWN_CA",
    "TLSV1_ALERT_ACCESS_DENIED",
    "TLSV1_ALERT_DECRYPT_ERROR",
}
NOT_TLS = {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}
HOSTNAME_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


class DeadlinePassed(TimeoutError):
    """No whole answer arrived in time."""


class ClientError(ValueError):
    """Client options that cannot be used (a file unreadable, not PEM, a key not the certificate's); one line."""


class _NamedServerContext(ssl.SSLContext):
    """A client context that asks for (SNI) and checks a certificate of *server_name*, whatever host the URL has."""

    server_name = ""

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        """Wrap *sock* as usual, but for the configured server name."""
        return super().wrap_socket(
            sock,
            server_side,
            do_handshake_on_connect,
            suppress_ragged_eofs,
            self.server_name or server_hostname,
            session,
        )


@dataclass(frozen=True)
class Client:
    """How to reach a server: the TLS context of https:// URLs and the basic-auth credentials, if any."""

    context: ssl.SSLContext | None = None  # None: the system's CAs, the URL's host
    authorization: str = ""  # the Authorization header's value; "" sends none
    user: str = ""
    password_file: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None


def make_client(
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    server_name: str = "",
    user: str = "",
    password_file: Path | None = None,
) -> Client:
    """A client from the --from.* options, every file read now; ClientError (one line) when one cannot be used."""
    context = _NamedServerContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and the host name
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.server_name = server_name
    if ca_file is None:
        context.load_default_certs()
    else:
        try:
            context.load_verify_locations(cafile=str(ca_file))
        except OSError as error:  # ssl.SSLError is an OSError too
            if isinstance(error, ssl.SSLError):
                raise ClientError(
                    f"--from.tls-ca-file {ca_file}: no PEM certificate in it ({_reason(error)})"
                ) from None
            raise ClientError(f"--from.tls-ca-file {ca_file}: cannot read it ({error.strerror})") from None
    if cert_file is not None and key_file is not None:
        try:
            context.load_cert_chain(str(cert_file), str(key_file))
        except ssl.SSLError as error:
            what = "the key is not the certificate's" if error.reason == "KEY_VALUES_MISMATCH" else "not PEM"
            raise ClientError(
                f"--from.tls-cert-file {cert_file} and --from.tls-key-file {key_file}: {what} ({_reason(error)})"
            ) from None
        except OSError as error:
            raise ClientError(f"cannot read {error.filename or cert_file}: {error.strerror}") from None
    authorization = ""
    if user and password_file is not None:
        try:
            password = password_file.read_text().rstrip("\n")
        except OSError as error:
            raise ClientError(
                f"--from.basic-auth-password-file {password_file}: cannot read it ({error.strerror})"
            ) from None
        if not password:
            raise ClientError(f"--from.basic-auth-password-file {password_file} is empty: put the password in it")
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return Client(context, authorization, user, password_file, ca_file, cert_file)


def get(
    url: str, seconds: float, max_bytes: int, headers: dict[str, str] | None = None, client: Client | None = None
) -> bytes:
    """The body of a GET of *url* (at most *max_bytes*); DeadlinePassed after *seconds*, urllib's errors otherwise
    (ssl.SSLError too, when the server refuses the client certificate after the handshake)."""
    client = client or Client()
    outcome: list[bytes | BaseException] = []

    def exchange() -> None:
        try:
            request = urllib.request.Request(url, headers=headers or {})
            if client.authorization:
                request.add_unredirected_header("Authorization", client.authorization)  # not to another host
            handlers = [urllib.request.HTTPSHandler(context=client.context)] if client.context is not None else []
            with urllib.request.build_opener(*handlers).open(request, timeout=seconds) as response:
                outcome.append(response.read(max_bytes))
        except BaseException as error:  # handed to the caller's thread
            outcome.append(error)

    worker = threading.Thread(target=exchange, name="diagnose-fetch", daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise DeadlinePassed(f"no whole answer within {seconds:g} s")
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def tls_problem(error: OSError, client: Client | None = None) -> str | None:
    """What a TLS failure means and what to give, in words (after "URL: "); None when *error* is not TLS's."""
    client = client or Client()
    cause = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(cause, ssl.SSLCertVerificationError):
        detail = cause.verify_message or _reason(cause)
        if cause.verify_code in HOSTNAME_MISMATCH:
            return (
                f"its certificate is not for the host in --from ({detail}): connect by a name the certificate "
                "carries, or give that name with --from.tls-server-name"
            )
        if client.ca_file is None:
            return (
                f"its certificate cannot be verified with the system's CAs ({detail}): give the CA that signed it "
                "with --from.tls-ca-file"
            )
        return (
            f"its certificate is not signed by a CA in {client.ca_file} ({detail}): give the CA that signed it "
            "with --from.tls-ca-file"
        )
    if not isinstance(cause, ssl.SSLError):
        return None
    if isinstance(cause, ssl.SSLEOFError):  # a server may close without the alert that says why
        if client.cert_file is None:
            return (
                f"it closed the TLS connection ({_reason(cause)}): if it asks for a client certificate, give one "
                "with --from.tls-cert-file and --from.tls-key-file"
            )
        return (
            f"it closed the TLS connection ({_reason(cause)}): if it refused the client certificate in "
            f"{client.cert_file}, give one signed by a CA the server trusts"
        )
    reason = cause.reason or ""
    if reason in CERTIFICATE_REQUIRED or (reason in CERTIFICATE_REFUSED and client.cert_file is None):
        return (
            f"it asks for a client certificate ({reason}): give one it trusts with --from.tls-cert-file and "
            "--from.tls-key-file"
        )
    if reason in CERTIFICATE_REFUSED:
        return (
            f"it refused the client certificate in {client.cert_file} ({reason}): give one signed by a CA the "
            "server trusts"
        )
    if reason in NOT_TLS:
        return f"it does not speak TLS there ({reason}): use http:// if it serves plain HTTP"
    return f"TLS failed ({_reason(cause)}): check the certificates and --from.tls-* options"


def refusal(code: int, client: Client | None = None) -> str | None:
    """What HTTP 401 or 403 means and what to give, in words (after "URL answered HTTP N ..."); None otherwise."""
    client = client or Client()
    if code not in (401, 403):
        return None
    if not client.authorization:
        return (
            "it wants HTTP basic auth: give --from.basic-auth-user and --from.basic-auth-password-file (or their "
            "SCHEDWATCH_FROM_* variables)"
        )
    return (
        f"it does not accept user {client.user!r} with the password in {client.password_file}: check both "
        "against what the server expects"
    )


def _reason(error: ssl.SSLError) -> str:
    return str(error.reason or error.strerror or error)
