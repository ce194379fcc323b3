"""Where the series come from: collectors loaded in this process, or a running agent's /metrics over HTTP."""

from __future__ import annotations

import ipaddress
import time
import urllib.error
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from agent import metrics
from agent.diagnosis.inputs.live import fetch
from agent.series.reading import NotSchedwatch, Reading, read_families

AGENT_TIMEOUT = 30.0  # seconds a whole scrape of the agent may take: seconds on a busy node with thousands of cgroups
MAX_METRICS_BYTES = 256 * 1024 * 1024  # a /metrics body read at most


class SourceError(Exception):
    """A source that cannot be read; the message is one line saying what to do."""


class Source(Protocol):
    """Something that gives a Reading of schedwatch's series each time it is asked."""

    name: str  # said in the report, e.g. "bpf (in this process)" or "agent http://127.0.0.1:17953/metrics"
    local: bool  # whether the series are this machine's (its /proc and cgroups can be read for details)

    def read(self) -> Reading:
        """One reading."""


class CollectedSource:
    """Collectors running in this process, asked directly (no HTTP)."""

    def __init__(
        self, collect: Callable[[], Iterable[Metric]], clock: Callable[[], float] = time.monotonic, mode: str = "bpf"
    ) -> None:
        self.name = f"{mode} (collectors loaded by diagnose)"
        self.local = True
        self._collect = collect
        self._clock = clock
        self._mode = mode

    def read(self) -> Reading:
        """Collect every family once."""
        started = self._clock()
        families = list(self._collect())
        return read_families(families, (started + self._clock()) / 2)

    def extended(self, more: Callable[[list[Metric]], list[Metric]]) -> CollectedSource:
        """This source with each collection's families passed through *more* (top adds its judged findings)."""
        return CollectedSource(lambda: more(list(self._collect())), self._clock, self._mode)


def metrics_url(url: str) -> str:
    """*url* with /metrics added when it names no path."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SourceError(
            f"--from {url!r}: give an agent as http://HOST:PORT, or a Prometheus as prometheus+http://HOST:PORT"
        )
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    return urllib.parse.urlunsplit(parts)


def is_loopback(url: str) -> bool:
    """Whether *url* names this machine by a loopback address or 'localhost'."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AgentSource:
    """A running agent's /metrics, read over HTTP and parsed by prometheus_client's parser."""

    def __init__(
        self,
        url: str,
        clock: Callable[[], float] = time.monotonic,
        timeout: float = AGENT_TIMEOUT,
        client: fetch.Client | None = None,
    ) -> None:
        self.url = metrics_url(url)
        self.name = f"agent {self.url}"
        self.local = is_loopback(self.url)
        self._clock = clock
        self._timeout = timeout
        self._client = client or fetch.Client()

    def read(self) -> Reading:
        """GET /metrics and parse it."""
        started = self._clock()
        text = self._get()
        at = (started + self._clock()) / 2  # the agent collects somewhere in between: a scrape can take a second
        try:
            return read_families(text_string_to_metric_families(text), at)
        except NotSchedwatch:
            raise SourceError(
                f"{self.url} is not a schedwatch agent's /metrics (no {metrics.BUILD_INFO.name}): point --from at "
                "the agent's port, e.g. http://127.0.0.1:17953"
            ) from None
        except ValueError as error:
            raise SourceError(f"{self.url} did not answer in the Prometheus text format ({error})") from None

    def _get(self) -> str:
        try:
            body = fetch.get(
                self.url, self._timeout, MAX_METRICS_BYTES, {"Accept": "text/plain; version=0.0.4"}, self._client
            )
        except urllib.error.HTTPError as error:
            advice = fetch.refusal(error.code, self._client) or "is this the agent's metrics port?"
            raise SourceError(f"{self.url} answered HTTP {error.code} {error.reason}: {advice}") from None
        except fetch.DeadlinePassed:
            raise SourceError(
                f"{self.url} sent no whole /metrics within {self._timeout:g} s: check that the agent is not "
                f"overloaded (its {metrics.COLLECT_DURATION.name}) and that nothing between holds the answer"
            ) from None
        except OSError as error:  # URLError, TLS errors and socket timeouts are OSErrors
            problem = fetch.tls_problem(error, self._client)
            if problem is not None:
                raise SourceError(f"{self.url}: {problem}") from None
            reason = error.reason if isinstance(error, urllib.error.URLError) else error
            if self.url.startswith("http://") and isinstance(reason, ConnectionResetError):
                hint = "if the agent serves TLS (its --web.tls-cert-file), use https://"
            else:
                hint = (
                    "is the agent running there? (in Kubernetes: kubectl exec ds/schedwatch -- schedwatch diagnose "
                    "--from http://127.0.0.1:17953)"
                )
            raise SourceError(f"cannot reach {self.url}: {reason}; {hint}") from None
        return body.decode("utf-8", errors="replace")
