"""The /metrics server: plain HTTP or TLS, optional basic auth, a bounded number of connections with deadlines.

The accept loop only accepts: each connection gets its own thread, which does the TLS handshake (when TLS is on),
reads the request and answers it. No client can hold the server, or the loop, for long:

- A connection must deliver its whole request (TLS handshake included) within ``timeout`` seconds of being
  accepted, and then take its whole answer within ``timeout`` seconds; a watcher thread shuts it down when it
  does not. (A client sending a byte at a time, or reading one, gets no more time.)
- One request per connection: the server closes the connection after answering, so no connection idles.
- At most ``max_connections`` connections are open. When one more arrives at the bound, the oldest connection
  that has not yet delivered its request is closed to admit it (slow clients lose their slots before scrapers,
  whose requests arrive within milliseconds); when every open connection is already being answered, the new one
  is closed at once.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from agent import metrics
from agent.exposition.wsgi import metrics_app
from agent.log import get_logger

log = get_logger("web")
WSGIApp = Callable[[dict[str, Any], Any], Iterable[bytes]]
LISTEN_BACKLOG = 128
DROP_REASONS = ("timeout", "evicted", "refused", "tls_handshake_failed")
MAX_REQUEST_LINE = 8192  # bytes; a longer request line is answered 414


@dataclass
class _Connection:
    """One accepted connection, from admission until its thread closes it."""

    sock: socket.socket
    address: Any
    deadline: float
    answering: bool = False  # its request has arrived: it has a new deadline, and is no longer evicted
    cut: str = ""  # why the server shut it down early, if it did
    closed: bool = False


class ConnectionGate:
    """Admits connections up to a bound, cuts those that miss their deadline, and counts what it turns away.

    Every change to the set of open connections, and every shutdown of a socket by someone other than its own
    thread, happens under one lock, so a socket is never shut down after its thread has closed it (when its file
    descriptor number may already belong to another connection).
    """

    def __init__(self, max_connections: int, timeout: float) -> None:
        self.max_connections = max_connections
        self.timeout = timeout
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self._open: dict[int, _Connection] = {}  # in order of admission
        self._unclosed = 0  # connections admitted whose sockets are not closed yet (cut ones included)
        self._changed = threading.Condition()
        self._stopped = False

    def start(self) -> None:
        """Start the thread that enforces deadlines."""
        threading.Thread(target=self._watch, name="http-deadlines", daemon=True).start()

    def stop(self, wait: float = 5.0) -> None:
        """Stop the deadline thread, shut down every open connection and wait (up to *wait* s) until all are closed."""
        with self._changed:
            self._stopped = True
            for connection in list(self._open.values()):
                self._cut(connection, "")
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._unclosed == 0, wait)

    def admit(self, sock: socket.socket, address: Any) -> _Connection | None:
        """A new connection, or None when it was refused (the caller closes it)."""
        with self._changed:
            if len(self._open) >= self.max_connections:
                oldest = next((c for c in self._open.values() if not c.answering), None)
                if oldest is None:
                    self.dropped["refused"] += 1
                    return None
                self._cut(oldest, "evicted")
            connection = _Connection(sock, address, time.monotonic() + self.timeout)
            self._open[id(connection)] = connection
            self._unclosed += 1
            self._changed.notify_all()
            return connection

    def wrap(self, connection: _Connection, context: ssl.SSLContext) -> ssl.SSLSocket:
        """Wrap the connection's socket for TLS without a handshake yet (the caller does it, under the deadline)."""
        with self._changed:
            if connection.cut:
                raise ConnectionAbortedError(f"connection {connection.cut}")
            wrapped = context.wrap_socket(connection.sock, server_side=True, do_handshake_on_connect=False)
            connection.sock = wrapped
            return wrapped

    def answering(self, connection: _Connection) -> bool:
        """Mark that the request has arrived, which starts the deadline for the answer; False if it was cut."""
        with self._changed:
            connection.answering = not connection.cut
            connection.deadline = time.monotonic() + self.timeout
            return connection.answering

    def drop(self, connection: _Connection, reason: str) -> None:
        """Count a connection its own thread gives up on (a read or write timed out, the TLS handshake failed),
        unless the gate already cut it."""
        with self._changed:
            if not connection.cut:
                connection.cut = reason
                self.dropped[reason] += 1

    def close(self, connection: _Connection) -> None:
        """Forget the connection and close its socket; called once, by its own thread."""
        with self._changed:
            self._open.pop(id(connection), None)
            connection.closed = True
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_WR)
        connection.sock.close()
        with self._changed:
            self._unclosed -= 1
            self._changed.notify_all()

    def open_count(self) -> int:
        """Connections open now."""
        with self._changed:
            return len(self._open)

    def _cut(self, connection: _Connection, reason: str) -> None:
        """Shut down a connection's socket from outside its thread (lock held); its thread then closes it."""
        self._open.pop(id(connection), None)
        if connection.closed or connection.cut:
            return
        connection.cut = reason or "stopped"
        if reason:
            self.dropped[reason] += 1
        with contextlib.suppress(OSError):
            # The plain socket's shutdown, also for a TLS socket: this thread must not touch the TLS state.
            socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)

    def _watch(self) -> None:
        with self._changed:
            while not self._stopped:
                now = time.monotonic()
                for connection in [c for c in self._open.values() if c.deadline <= now]:
                    self._cut(connection, "timeout")
                pending = [c.deadline for c in self._open.values()]
                self._changed.wait(min(pending) - now if pending else None)

    def collect(self) -> Iterator[Metric]:
        """The server's self-metrics (registered in the scrape registry by :func:`serve`)."""
        dropped = metrics.WEB_CONNECTIONS_DROPPED.family()
        opened = metrics.WEB_CONNECTIONS_OPEN.family()
        with self._changed:
            for reason, count in self.dropped.items():
                dropped.add_metric([reason], count)
            opened.add_metric([], len(self._open))
        yield dropped
        yield opened


class _Answer(ServerHandler):
    """wsgiref's response writer, with failures logged through the agent's log and write timeouts counted."""

    def __init__(self, request: _Handler) -> None:
        output = cast(IO[bytes], request.wfile)  # a socket writer, typed more narrowly than wsgiref needs
        super().__init__(request.rfile, output, sys.stderr, request.get_environ(), multithread=True)
        self.request_handler = request

    def log_exception(self, exc_info: Any) -> None:
        """A client that went away or stalled is not the agent's failure; anything else is."""
        if isinstance(exc_info[1], OSError):
            if isinstance(exc_info[1], TimeoutError):
                self.request_handler.gate.drop(self.request_handler.admitted, "timeout")
            log.debug("answer_abandoned", error=str(exc_info[1]))
        else:
            log.error("answer_failed", exc_info=exc_info)


class _Handler(WSGIRequestHandler):
    """Reads one request (line and headers, bounded by http.server) and answers it through the WSGI app."""

    def __init__(self, connection: _Connection, gate: ConnectionGate, server: MetricsServer) -> None:
        self.admitted = connection
        self.gate = gate
        super().__init__(connection.sock, connection.address, server)

    def handle(self) -> None:
        """One request per connection; the connection is being answered once its line and headers are in."""
        self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
        if len(self.raw_requestline) > MAX_REQUEST_LINE:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if self.parse_request() and self.gate.answering(self.admitted):
            _Answer(self).run(self.server.get_app())  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged: one line per scrape would be noise."""


class MetricsServer(WSGIServer):
    """A WSGI server that admits connections through a :class:`ConnectionGate` and serves each in its own thread."""

    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        app: WSGIApp,
        gate: ConnectionGate,
        tls: ssl.SSLContext | None,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.gate = gate
        self.tls = tls
        super().__init__(address, _Handler)
        self.set_app(app)

    @property
    def port(self) -> int:
        """The port it listens on (useful when it was asked for port 0)."""
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        """Called by the accept loop: admit the connection and hand it to a thread of its own, or close it."""
        connection = self.gate.admit(request, client_address)
        if connection is None:
            request.close()
            return
        try:
            threading.Thread(target=self._serve, args=(connection,), name="http-connection", daemon=True).start()
        except RuntimeError:  # no thread to be had: the process is at its limit
            self.gate.drop(connection, "refused")
            self.gate.close(connection)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """An error in the accept loop is logged, once per occurrence, and the loop goes on."""
        log.exception("accept_failed")

    def _serve(self, connection: _Connection) -> None:
        try:
            connection.sock.settimeout(self.gate.timeout)
            if self.tls is not None:
                try:
                    self.gate.wrap(connection, self.tls).do_handshake()
                except ssl.SSLError:
                    self.gate.drop(connection, "tls_handshake_failed")
                    return
            _Handler(connection, self.gate, self)
        except TimeoutError:
            self.gate.drop(connection, "timeout")
        except OSError:
            pass  # cut by the gate (already counted), or the client went away
        finally:
            self.gate.close(connection)

    def stop(self) -> None:
        """Stop accepting, close the listening socket and every open connection."""
        self.shutdown()
        self.server_close()
        self.gate.stop()


def basic_auth(app: WSGIApp, user: str, password: str) -> WSGIApp:
    """Wrap *app* so that it answers only requests carrying the right user and password."""
    expected = base64.b64encode(f"{user}:{password}".encode()).decode()

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        header = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, credentials = header.partition(" ")
        given = credentials.strip().encode("utf-8", "surrogateescape")  # a header may hold any byte
        if scheme.lower() == "basic" and hmac.compare_digest(given, expected.encode()):
            return app(environ, start_response)
        start_response(
            "401 Unauthorized", [("WWW-Authenticate", 'Basic realm="schedwatch"'), ("Content-Type", "text/plain")]
        )
        return [b"401 Unauthorized\n"]

    return guarded


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context for TLS 1.2 or later with the given certificate and key (PEM); raises ssl.SSLError."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))
    return context


def serve(
    registry: CollectorRegistry,
    host: str,
    port: int,
    *,
    max_connections: int,
    timeout: float,
    tls: tuple[Path, Path] | None = None,
    auth: tuple[str, str] | None = None,
) -> MetricsServer:
    """Serve /metrics in background threads, optionally over TLS (cert, key) and behind basic auth (user, password).

    The server's own counters (connections dropped, open) are added to *registry*. Raises OSError or ssl.SSLError
    when it cannot listen or load the TLS files.
    """
    app: WSGIApp = metrics_app(registry)
    if auth is not None:
        app = basic_auth(app, *auth)
    context = tls_context(*tls) if tls is not None else None
    gate = ConnectionGate(max_connections, timeout)
    server = MetricsServer((host, port), app, gate, context)
    registry.register(gate)
    gate.start()
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
