"""Container id -> names and Kubernetes labels, asked of the runtimes in the background, never during a scrape.

A scrape only reads the cache: an id not resolved yet gets id-only labels, and is queued. Once rounds are used
(begin_round, at the start of each scrape), an answer that arrives during a round is published at the next one, so
every collector of a scrape sees the same names (one collector's series must not carry a container's names while
another's still carry its id alone). A worker thread asks
each configured runtime in turn (each call bounded by its timeout), caches the answer, and retries ids that no
runtime knew (or whose runtime did not answer) after a back-off. Entries not asked for in a while are dropped, so
the cache is bounded by the containers alive on the node.

What is cached is an :class:`Identity`: the names already made label values (agent.identity.labels), and the
anchors of the container, the cgroup paths (up to the component naming the container) that the process the
runtime reported sits in. A cgroup named after a container gets its names only if its anchor is one of these
(agent.identity.workload), so a directory named like another container's id is not that container.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.identity.labels import label_value
from agent.identity.paths import container_anchor
from agent.identity.runtimes import ContainerInfo, RuntimeClient, RuntimeUnavailable
from agent.log import get_logger
from agent.machine.cgroups.layout import parse_proc_cgroup
from agent.machine.procfs import ProcFS

log = get_logger("identity")

# No runtime knew the id. A container's cgroup appears (runc's init runs in it) before every runtime reports the
# container, so a new id is asked again after a second, then after twice as long each time, up to this.
RETRY_NOT_FOUND_FIRST_SECONDS = 1.0
RETRY_NOT_FOUND_SECONDS = 30.0
RETRY_ERROR_SECONDS = 5.0  # a runtime did not answer (starting up, restarting)
FORGET_SECONDS = 600.0
MAX_QUEUE = 4096


@dataclass(frozen=True)
class Identity:
    """A container's names as label values, and where its processes are (None: the runtime gave no process)."""

    container: str
    pod: str = ""
    namespace: str = ""
    anchors: frozenset[str] | None = None


@dataclass
class _Entry:
    info: Identity | None
    resolved_at: float
    last_wanted: float
    retry_after: float = RETRY_NOT_FOUND_SECONDS
    misses: int = 0  # answers in a row in which no runtime knew the id


class IdentityResolver:
    """Non-blocking cache of container identities, filled by one background worker."""

    def __init__(
        self,
        clients: Sequence[RuntimeClient],
        clock: Callable[[], float] = time.monotonic,
        proc: ProcFS | None = None,
    ) -> None:
        self._clients = list(clients)
        self._proc = proc or ProcFS()
        self._clock = clock
        self._cache: dict[str, _Entry] = {}
        self._held: dict[str, _Entry] = {}  # answers of the current round, published at the next begin_round
        self._in_rounds = False
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._queue: queue.Queue[str | None] = queue.Queue(MAX_QUEUE)
        self._worker: threading.Thread | None = None
        self._lookups: dict[tuple[str, str], int] = {}  # (runtime, ok | not_found | error) -> count

    def start(self) -> None:
        """Start the worker (no-op without clients)."""
        if self._clients and self._worker is None:
            self._worker = threading.Thread(target=self._run, name="identity", daemon=True)
            self._worker.start()

    def stop(self) -> None:
        """Stop the worker."""
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(timeout=5)
            self._worker = None

    def begin_round(self) -> None:
        """A scrape begins: publish the answers that arrived since the last one, and hold back those that arrive
        during this one until the next."""
        with self._lock:
            self._cache.update(self._held)
            self._held.clear()
            self._in_rounds = True

    def get(self, container_id: str) -> Identity | None:
        """The cached identity of *container_id*, or None (and a lookup is queued)."""
        now = self._clock()
        with self._lock:
            entry = self._cache.get(container_id)
            if container_id in self._held:  # answered during this round: the round keeps what it began with
                return entry.info if entry else None
            if entry is not None:
                entry.last_wanted = now
                unplaced = entry.info is None or entry.info.anchors == frozenset()  # asked again: it may be there now
                stale = unplaced and now - entry.resolved_at > entry.retry_after
                if not stale:
                    return entry.info
            if container_id in self._pending or not self._clients:
                return entry.info if entry else None
            self._pending.add(container_id)
        try:
            self._queue.put_nowait(container_id)
        except queue.Full:
            with self._lock:
                self._pending.discard(container_id)
        return entry.info if entry else None

    def forget_unwanted(self) -> None:
        """Drop entries nobody asked for in FORGET_SECONDS (containers long gone)."""
        now = self._clock()
        with self._lock:
            for container_id in [c for c, e in self._cache.items() if now - e.last_wanted > FORGET_SECONDS]:
                del self._cache[container_id]

    def resolve_now(self, container_id: str) -> Identity | None:
        """Ask the runtimes synchronously (the worker's step; also for tests and `schedwatch check`)."""
        info: ContainerInfo | None = None
        failed = False
        for client in self._clients:
            try:
                info = client.inspect(container_id)
            except RuntimeUnavailable as error:
                self._count(client.name, "error")
                failed = True
                log.debug("runtime_unavailable", runtime=client.name, error=str(error))
                continue
            except Exception as error:  # a malformed, huge or lying answer must not kill the worker
                self._count(client.name, "error")
                failed = True
                log.warning("runtime_answer_invalid", runtime=client.name, error=label_value(str(error)))
                continue
            self._count(client.name, "ok" if info else "not_found")
            if info is not None:
                break
        identity = None if info is None else self._identity(container_id, info)
        now = self._clock()
        with self._lock:
            previous = self._held.get(container_id) or self._cache.get(container_id)
            misses = 0
            if failed:
                retry = RETRY_ERROR_SECONDS
            else:
                misses = (previous.misses if previous is not None else 0) + (identity is None)
                retry = min(RETRY_NOT_FOUND_SECONDS, RETRY_NOT_FOUND_FIRST_SECONDS * 2 ** max(0, misses - 1))
            (self._held if self._in_rounds else self._cache)[container_id] = _Entry(identity, now, now, retry, misses)
            self._pending.discard(container_id)
        return identity

    def _identity(self, container_id: str, info: ContainerInfo) -> Identity:
        """The answer as label values, with the anchors of the process the runtime named."""
        return Identity(
            container=label_value(info.container),
            pod=label_value(info.pod),
            namespace=label_value(info.namespace),
            anchors=self._anchors(container_id, info.pid) if info.pid > 0 else None,
        )

    def _anchors(self, container_id: str, pid: int) -> frozenset[str]:
        """Where *pid* sits, in every hierarchy, up to the component naming *container_id* (empty: nowhere)."""
        text = self._proc.read_text(pid, "cgroup")
        if text is None:
            return frozenset()
        anchors = set()
        for path in parse_proc_cgroup(text).values():
            found, anchor = container_anchor(path)
            if found == container_id:
                anchors.add(anchor)
        return frozenset(anchors)

    def lookup_counts(self) -> dict[tuple[str, str], int]:
        """Lookups so far by (runtime, result): ok, not_found or error."""
        with self._lock:
            return dict(self._lookups)

    def _count(self, runtime: str, result: str) -> None:
        with self._lock:
            self._lookups[(runtime, result)] = self._lookups.get((runtime, result), 0) + 1

    def _run(self) -> None:
        while True:
            container_id = self._queue.get()
            if container_id is None:
                return
            try:
                self.resolve_now(container_id)
            except Exception:  # the worker must outlive any one lookup
                log.exception("identity_lookup_failed")
                with self._lock:
                    self._pending.discard(container_id)
