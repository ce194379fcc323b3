"""Many threads in one Podman container, and concurrent scrapers (run under flock /tmp/schedwatch-containers.lock).

The container runs `sh -c "threader ...; true"`: every thread yields exactly K times, then all stay alive. The
agent must count the container's threads exactly and the threader's yields exactly, and four scrapers scraping
every second at once must each get HTTP 200 every time, with counters that never go backwards.
"""

from __future__ import annotations

import itertools
import statistics
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.load.sizes import record, size
from tests.support.agent import REPO, AgentProcess, require_root
from tests.support.containers import Podman, container_pid, podman_setup
from tests.support.scrape import Sample, Scrape
from tests.support.workloads import build

THREADS = size(2_000, 10_000)
PER_THREAD = 100
SCRAPERS, SCRAPE_EVERY, SCRAPE_FOR = 4, 1.0, size(10, 60)
# runc's init is the container's first process before it execs the command, and it yields a few times.
RUNC_INIT_YIELDS = 50
COUNTER_SUFFIXES = ("_total", "_count", "_sum", "_bucket")


class PodmanCli(Podman):
    """Podman through its command line only: this test needs no API socket, and must not replace the one the
    container tier's session serves on /run/podman/podman.sock."""

    def __init__(self) -> None:
        podman_setup()
        self.prefix = f"swload-{uuid.uuid4().hex[:6]}"
        self.binaries = REPO / "tests" / ".build"

    def close(self) -> None:
        listing = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
        for name in listing.stdout.split():
            if name.startswith(self.prefix):
                self.remove(name)


@pytest.fixture(scope="module")
def podman() -> Iterator[Podman]:
    require_root()
    build("threader")
    runtime = PodmanCli()
    yield runtime
    runtime.close()


@pytest.fixture(scope="module")
def thread_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    work = tmp_path_factory.mktemp("threads")
    agent = AgentProcess(work / "agent.log", "--process-top-k", "20", "--state-dir", str(work))
    agent.wait_ready()
    yield agent
    assert agent.stop() == 0, agent.log()


def threader_pid(shell_pid: int, timeout: float = 30.0) -> int:
    """The threader: the shell's one child, once it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{shell_pid}/task/{shell_pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError(f"{shell_pid} started no child")


def wait_for_threads(pid: int, count: int, timeout: float = 120.0) -> None:
    """Until *pid* has *count* threads and every one has yielded (its 2nd line of output is the signal)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(list(Path(f"/proc/{pid}/task").iterdir())) == count:
            return
        time.sleep(0.2)
    raise AssertionError(f"{pid} never reached {count} threads")


class Scraper(threading.Thread):
    """Scrapes every SCRAPE_EVERY seconds for SCRAPE_FOR seconds; keeps status codes, counters that went down
    between consecutive scrapes, and what each scrape says of the container (never every scrape: a node with
    thousands of cgroups makes each one tens of megabytes once parsed)."""

    def __init__(self, url: str, start_at: float, container: str) -> None:
        super().__init__(daemon=True)
        self.url, self.start_at, self.container = url, start_at, container
        self.statuses: list[int | str] = []
        self.went_down: list[tuple[Sample, float, float]] = []
        self.container_seen: list[tuple[float | None, float | None]] = []  # (threads, yields) per scrape
        self.seconds: list[float] = []
        self._previous: Scrape | None = None

    def run(self) -> None:
        next_at = self.start_at
        while next_at < self.start_at + SCRAPE_FOR:
            time.sleep(max(0.0, next_at - time.monotonic()))
            began = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    self.statuses.append(response.status)
                    scrape = Scrape(response.read().decode())
                if self._previous is not None:
                    self.went_down += backwards([self._previous, scrape])
                self._previous = scrape
                self.container_seen.append(
                    (
                        scrape.value("schedwatch_threads", container_id=self.container),
                        scrape.value("schedwatch_sched_yield_calls_total", container_id=self.container),
                    )
                )
            except OSError as error:
                self.statuses.append(repr(error))
            self.seconds.append(time.monotonic() - began)
            next_at += SCRAPE_EVERY


def answers_seen(scrapers: list[Scraper]) -> set[int | str]:
    """Every distinct answer (status code or error) the scrapers got."""
    return {status for scraper in scrapers for status in scraper.statuses}


def backwards(scrapes: list[Scrape]) -> list[tuple[Sample, float, float]]:
    """Counter samples that went down from one scrape to the next."""
    found = []
    for earlier, later in itertools.pairwise(scrapes):
        for key, value in later.samples.items():
            before = earlier.samples.get(key)
            if key[0].endswith(COUNTER_SUFFIXES) and before is not None and value < before:
                found.append((key, before, value))
    return found


def test_thousands_of_threads_in_one_container_with_four_scrapers(thread_agent: AgentProcess, podman: Podman) -> None:
    command = f"/w/threader - {THREADS} {PER_THREAD} 1; true"
    began = time.monotonic()
    container = podman.run("threads", "sh", "-c", command, options=("-i", "--pids-limit", "-1"))
    threader = threader_pid(container_pid(podman, container))
    wait_for_threads(threader, THREADS + 1)
    started_seconds = time.monotonic() - began
    # The threads exist once created; their yields are done when the threader has printed its report.
    deadline = time.monotonic() + 120
    while True:
        scrape = thread_agent.scrape()
        process = scrape.find("schedwatch_process_sched_yield_calls_total", pid=str(threader))
        if list(process.values()) == [THREADS * PER_THREAD] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert list(process.values()) == [THREADS * PER_THREAD], process
    assert dict(next(iter(process)))["container_id"] == container
    # The container: the shell and the threader with its threads, all counted now.
    assert scrape.value("schedwatch_threads", container_id=container) == THREADS + 2
    total = scrape.value("schedwatch_sched_yield_calls_total", container_id=container)
    assert total is not None and THREADS * PER_THREAD <= total <= THREADS * PER_THREAD + RUNC_INIT_YIELDS

    start_at = time.monotonic() + 0.5
    scrapers = [Scraper(thread_agent.url, start_at, container) for _ in range(SCRAPERS)]
    for scraper in scrapers:
        scraper.start()
    for scraper in scrapers:
        scraper.join()
    record(
        "threads_and_scrapers",
        threads=THREADS,
        yields_expected=THREADS * PER_THREAD,
        yields_seen=next(iter(process.values())),
        threads_seen=scrape.value("schedwatch_threads", container_id=container),
        container_yields=total,
        seconds_to_start_threads=round(started_seconds, 1),
        scrapers=SCRAPERS,
        scrapes=sum(len(s.statuses) for s in scrapers),
        scrape_seconds_max=round(max(t for s in scrapers for t in s.seconds), 3),
        scrape_seconds_median=round(statistics.median(t for s in scrapers for t in s.seconds), 3),
        series=len(scrape.samples),
        answers={str(status): sum(s.statuses.count(status) for s in scrapers) for status in answers_seen(scrapers)},
    )
    expected_scrapes = round(SCRAPE_FOR / SCRAPE_EVERY)
    for scraper in scrapers:
        assert scraper.statuses == [200] * expected_scrapes, scraper.statuses
        assert not scraper.went_down, scraper.went_down[:5]
        # every scrape tells the same story about the container
        assert scraper.container_seen == [(THREADS + 2, total)] * expected_scrapes
    podman.remove(container)
