"""IdentityResolver: never blocks, caches answers, retries what no runtime could answer."""

from __future__ import annotations

from agent.identity.resolver import RETRY_ERROR_SECONDS, RETRY_NOT_FOUND_SECONDS, Identity, IdentityResolver
from agent.identity.runtimes import ContainerInfo, RuntimeUnavailable


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ScriptedRuntime:
    """A runtime client whose answers the test decides (the resolver's logic is what is under test)."""

    name = "scripted"

    def __init__(self) -> None:
        self.answers: dict[str, ContainerInfo | Exception | None] = {}
        self.asked: list[str] = []

    def inspect(self, container_id: str) -> ContainerInfo | None:
        self.asked.append(container_id)
        answer = self.answers.get(container_id)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_first_ask_returns_nothing_and_queues_a_lookup() -> None:
    runtime = ScriptedRuntime()
    runtime.answers["a"] = ContainerInfo("app", "web", "shop")
    resolver = IdentityResolver([runtime])
    assert resolver.get("a") is None  # never blocks: the worker is not even running
    assert resolver.get("a") is None  # queued once, not twice
    assert resolver.resolve_now("a") == Identity("app", "web", "shop")
    assert resolver.get("a") == Identity("app", "web", "shop")
    assert resolver.lookup_counts() == {("scripted", "ok"): 1}


def test_worker_fills_the_cache_in_the_background() -> None:
    import time

    runtime = ScriptedRuntime()
    runtime.answers["b"] = ContainerInfo("db")
    resolver = IdentityResolver([runtime])
    resolver.start()
    try:
        resolver.get("b")
        deadline = time.monotonic() + 5
        while resolver.get("b") is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert resolver.get("b") == Identity("db")
    finally:
        resolver.stop()


def test_errors_are_retried_sooner_than_unknown_ids() -> None:
    clock = Clock()
    runtime = ScriptedRuntime()
    runtime.answers["down"] = RuntimeUnavailable("timed out")
    resolver = IdentityResolver([runtime], clock=clock)
    resolver.resolve_now("down")
    resolver.resolve_now("unknown")
    clock.now = RETRY_ERROR_SECONDS + 0.1
    resolver.get("down")
    resolver.get("unknown")
    assert resolver._queue.qsize() == 1  # only the one whose runtime failed is asked again
    clock.now = RETRY_NOT_FOUND_SECONDS + 0.1
    resolver.get("unknown")
    assert resolver._queue.qsize() == 2
    assert resolver.lookup_counts() == {("scripted", "error"): 1, ("scripted", "not_found"): 1}


def test_entries_nobody_wants_are_forgotten() -> None:
    clock = Clock()
    resolver = IdentityResolver([ScriptedRuntime()], clock=clock)
    resolver.resolve_now("gone")
    clock.now = 10_000
    resolver.forget_unwanted()
    assert resolver._cache == {}
