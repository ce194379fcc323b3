"""A fork/exec storm: M short-lived processes in one cgroup, each yielding exactly K times.

Keyed by cgroup every yield lands in the cgroup's total, exactly. Keyed by process (as on hosts without cgroup2)
a process living ~1 ms is often gone before the agent reads its /proc entry: then its yields go to
`cgroup="(removed)"`; placed plus removed must still be M*K, and nothing may be dropped by a full map while a
scraper scrapes at Prometheus's pace.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.load.sizes import record, size
from tests.support.agent import AgentProcess, require_root
from tests.support.scrape import Scrape
from tests.support.workloads import CgroupSandbox, Workload

YIELDS = "schedwatch_sched_yield_calls_total"
DROPPED = "schedwatch_bpf_events_dropped_total"
CHILDREN = size(5_000, 100_000)
PER_CHILD = 7
PARALLEL = 4
SCRAPE_EVERY = 15.0
# Keyed by process, an exited process keeps its map entry until it is folded in; with the default map (16,384
# when keyed by process) ~1,300 exits a second would fill it in ~12 s, less than a scrape interval, so the agent
# folds between scrapes once a quarter of the map may have filled. The storm runs with the default map.


def start(work: Path, *flags: str) -> AgentProcess:
    agent = AgentProcess(work / "agent.log", "--series-grace", "60", "--state-dir", str(work), *flags)
    agent.wait_ready()
    return agent


@pytest.fixture(params=["cgroup", "process"])
def keyed_by(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, AgentProcess]]:
    require_root()
    agent = start(tmp_path, "--workloads-by", request.param)
    yield request.param, agent
    assert agent.stop() == 0, agent.log()


def dropped(scrape: Scrape) -> float:
    """Every event dropped by a full map, summed over collectors and maps (the series must exist)."""
    found = scrape.find(DROPPED)
    assert found, f"the agent exports no {DROPPED}"
    return sum(found.values())


def removed_yields(scrape: Scrape) -> float:
    """Yields of processes that exited unplaced; absent until the first such process (a fresh agent)."""
    return scrape.value(YIELDS, cgroup="(removed)", container_id="") or 0.0


class Scraper:
    """Scrapes the agent every *interval* seconds in the background, as Prometheus would."""

    def __init__(self, agent: AgentProcess, interval: float) -> None:
        self.agent, self.interval = agent, interval
        self.scrapes = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.agent.scrape()
            except Exception as error:  # asserted by the test: a failed scrape must not end the thread unseen
                self.failures.append(repr(error))
            self.scrapes += 1

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def test_every_yield_of_a_fork_storm_is_counted(
    keyed_by: tuple[str, AgentProcess], cgroups: CgroupSandbox, forker: Path
) -> None:
    mode, agent = keyed_by
    group = cgroups.make(f"storm-{mode}")
    path = cgroups.relative(group)
    before = agent.scrape()
    removed_before, dropped_before = removed_yields(before), dropped(before)
    began = time.monotonic()
    with Scraper(agent, SCRAPE_EVERY) as scraper:
        storm = Workload(forker, group, CHILDREN, PER_CHILD, PARALLEL, hold=False)
    seconds = time.monotonic() - began
    assert storm.truth == {"pid": storm.pid, "children": CHILDREN, "clean": CHILDREN, "yields": CHILDREN * PER_CHILD}
    after = agent.scrape()
    placed = after.value(YIELDS, cgroup=path, container_id="")
    assert placed is not None, f"no yield series for {path}"
    removed = (after.value(YIELDS, cgroup="(removed)", container_id="") or 0.0) - removed_before
    lost_to_full_maps = dropped(after) - dropped_before
    record(
        "fork_storm",
        keyed_by=mode,
        children=CHILDREN,
        yields_per_child=PER_CHILD,
        parallel=PARALLEL,
        seconds=round(seconds, 1),
        forks_per_second=round(CHILDREN / seconds),
        scrapes_during=scraper.scrapes,
        expected=CHILDREN * PER_CHILD,
        placed=placed,
        removed=removed,
        dropped_events=lost_to_full_maps,
        others_in_removed=placed + removed - CHILDREN * PER_CHILD,
    )
    assert scraper.failures == [], f"scrapes failed during the storm: {scraper.failures}"
    assert lost_to_full_maps == 0
    if mode == "cgroup":
        # (removed) may grow from other users' cgroups removed before a scrape saw them: not ours to check.
        assert placed == CHILDREN * PER_CHILD
    else:
        assert placed <= CHILDREN * PER_CHILD
        if placed < CHILDREN * PER_CHILD:  # the rest must be in the catch-all, which must then exist
            assert after.value(YIELDS, cgroup="(removed)", container_id="") is not None
        # Keyed by process, every process on the machine that exits unplaced lands in (removed) too, and the
        # machine is shared: none of ours may be missing, and the excess is recorded (0 on a quiet machine).
        assert placed + removed >= CHILDREN * PER_CHILD, (placed, removed)
