"""IdentityResolver: never blocks, caches answers, retries what no runtime could answer."""

from __future__ import annotations

from agent.identity.resolver import (
    FORGET_SECONDS,
    RETRY_ERROR_SECONDS,
    RETRY_NOT_FOUND_FIRST_SECONDS,
    RETRY_NOT_FOUND_SECONDS,
    Identity,
    IdentityResolver,
)
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


def test_an_answer_that_arrives_during_a_scrape_is_used_from_the_next_one() -> None:
    """Every collector of one scrape sees the same names: the answer waits for the next round, and is not asked
    again meanwhile."""
    runtime = ScriptedRuntime()
    runtime.answers["a"] = ContainerInfo("app", "web", "shop")
    resolver = IdentityResolver([runtime])
    resolver.begin_round()
    assert resolver.get("a") is None  # the first collector: queued
    assert resolver.resolve_now("a") == Identity("app", "web", "shop")  # the worker answers mid-scrape
    assert resolver.get("a") is None  # the next collector of the same scrape: still the id alone
    resolver.begin_round()
    assert resolver.get("a") == Identity("app", "web", "shop")
    assert runtime.asked == ["a"]


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


def test_errors_are_retried_sooner_than_ids_long_unknown() -> None:
    clock = Clock()
    runtime = ScriptedRuntime()
    runtime.answers["down"] = RuntimeUnavailable("timed out")
    resolver = IdentityResolver([runtime], clock=clock)
    resolver.resolve_now("down")
    for _ in range(8):  # unknown eight times in a row: asked again only every RETRY_NOT_FOUND_SECONDS now
        resolver.resolve_now("unknown")
    clock.now = RETRY_ERROR_SECONDS + 0.1
    resolver.get("down")
    resolver.get("unknown")
    assert resolver._queue.qsize() == 1  # only the one whose runtime failed is asked again
    clock.now = RETRY_NOT_FOUND_SECONDS + 0.1
    resolver.get("unknown")
    assert resolver._queue.qsize() == 2
    assert resolver.lookup_counts() == {("scripted", "error"): 1, ("scripted", "not_found"): 8}


def test_a_new_unknown_id_is_asked_again_soon_then_less_and_less_often() -> None:
    # A container's cgroup shows up before its runtime reports the container: the first "not found" must not
    # leave it unnamed for 30 s.
    clock = Clock()
    runtime = ScriptedRuntime()
    resolver = IdentityResolver([runtime], clock=clock)
    waits = []
    for _ in range(7):
        resolver.resolve_now("young")
        asked_at = clock.now
        while True:
            clock.now += 0.25
            resolver.get("young")
            if resolver._queue.qsize():
                resolver._queue.get_nowait()
                resolver._pending.discard("young")
                break
        waits.append(clock.now - asked_at)
    first = RETRY_NOT_FOUND_FIRST_SECONDS
    assert waits == [
        first + 0.25,
        2 * first + 0.25,
        4 * first + 0.25,
        8 * first + 0.25,
        16 * first + 0.25,
        30.25,
        30.25,
    ]
    runtime.answers["young"] = ContainerInfo("late")
    assert resolver.resolve_now("young") == Identity("late")
    assert resolver.get("young") == Identity("late")


def test_entries_nobody_wants_are_forgotten() -> None:
    clock = Clock()
    runtime = ScriptedRuntime()
    runtime.answers = {"gone": ContainerInfo("old"), "wanted": ContainerInfo("app")}
    resolver = IdentityResolver([runtime], clock=clock)
    resolver.resolve_now("gone")
    resolver.resolve_now("wanted")
    clock.now = FORGET_SECONDS
    assert resolver.get("wanted") == Identity("app")  # asked for: wanted again from now on
    clock.now = FORGET_SECONDS + 1
    resolver.forget_unwanted()
    assert resolver.get("wanted") == Identity("app"), "an entry asked for within FORGET_SECONDS is kept"
    assert resolver.get("gone") is None, "an entry nobody asked for is forgotten: a new lookup is queued"
    assert runtime.asked == ["gone", "wanted"], "the answers were the cached ones, no runtime was asked again"
