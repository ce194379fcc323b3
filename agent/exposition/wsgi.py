"""The WSGI application that answers a scrape with the text format, gzip-compressed when the scraper accepts it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry

from agent.exposition.gzipped import ChunkedGzip
from agent.exposition.text import CONTENT_TYPE, TextWriter, joined

WSGIApp = Callable[[dict[str, Any], Any], Iterable[bytes]]
# zlib's fastest level: a 3.6 MB scrape (1,000 workloads) compresses to ~6 % of its size either way, and level 1
# costs a third of the default's CPU (docs/benchmarks.md).
GZIP_LEVEL = 1


def metrics_app(registry: CollectorRegistry) -> WSGIApp:
    """Serve every collector of *registry* at any path but /favicon.ico (as prometheus_client's app does)."""
    writer = TextWriter()
    compressor = ChunkedGzip(GZIP_LEVEL)
    lock = threading.Lock()  # writer and compressor keep what the last scrape made: one scrape writes at a time

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/favicon.ico":
            start_response("200 OK", [])
            return [b""]
        families = list(registry.collect())  # collectors serialise themselves; only the writing waits its turn
        headers = [("Content-Type", CONTENT_TYPE)]
        with lock:
            chunks = writer.write_chunks(families)
            if "gzip" in environ.get("HTTP_ACCEPT_ENCODING", ""):
                body = compressor.compress(chunks)
                headers.append(("Content-Encoding", "gzip"))
            else:
                body = joined(chunks)
        start_response("200 OK", headers)
        return [body]

    return app
