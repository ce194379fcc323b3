"""The sched collector's neighbours: each workload's top neighbours by what they held of its CPUs lately, plus
(other), every exported counter monotonic while the pair entries of the kernel's LRU map are evicted and made again.

The cgroups are the end-to-end fixture's copied tree (real cgroup ids); the snapshots are what SchedProbe.read()
returns, handed to the real collector in place of a loaded program.
"""

from __future__ import annotations

import itertools

from agent.bpf.probes.base import MapHealth
from agent.bpf.probes.sched import PairEntry, SchedSnapshot
from agent.collectors import CollectorContext
from agent.collectors.sched import OTHER_NEIGHBOURS, SchedCollector
from agent.config import Settings
from agent.identity.placement import CgroupKeys
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts
from agent.metrics import RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS
from tests.unit.test_end_to_end_metrics import TREE, FixtureProbe, cgroup_ids

IDS = cgroup_ids()
WAITER = IDS["/schedwatch-golden/batch"]
OLD = [IDS["/"], IDS["/schedwatch-golden"], IDS["/schedwatch-golden/kubepods/burstable"]]  # the first three
NOW = IDS["/schedwatch-golden/kubepods"]  # the neighbour that is noisy now
SECOND = 1_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def collector(probe: FixtureProbe, clock: Clock) -> SchedCollector:
    layout = CgroupLayout(unified=TREE / "unified", v1={})
    facts = MachineFacts("6.18.0", True, {}, False, None, None, "", layout, TREE / "unified", None)
    resolver = CgroupPathResolver(TREE / "unified")
    context = CollectorContext(Settings(), facts, resolver, CgroupKeys(resolver), IdentityResolver([]))
    return SchedCollector(context, probe, clock)  # type: ignore[arg-type]


def snapshot(pairs: dict[PairEntry, int]) -> SchedSnapshot:
    return SchedSnapshot({}, {}, MapHealth({}, {}, {}), pairs)


def neighbour_series(sched: SchedCollector) -> dict[str, float]:
    """The waiter's neighbour series by neighbour name, in seconds."""
    families = {family.name: family for family in sched.snapshot_families(sched._probe.read())}
    family = families[RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS.name]
    return {sample.labels["neighbour"]: sample.value for sample in family.samples}


def test_a_neighbour_noisy_now_takes_the_slot_of_one_that_was_noisy_before() -> None:
    """Three neighbours held 100 s each before the agent read them first; then they hold 1 s a read (15 s) and a
    fourth, never more than 40 s in all, holds 10 s a read: once the old ones were named 60 s it is named, although
    its total stays far below theirs. No series ever goes backwards, and all of them sum to the whole wait."""
    clock = Clock()
    totals = {(WAITER, holder, 7): 100 * SECOND for holder in OLD}
    probe = FixtureProbe(snapshot(totals), [])
    sched = collector(probe, clock)
    seen: list[dict[str, float]] = [neighbour_series(sched)]
    assert set(seen[0]) == {"/", "/schedwatch-golden", "/schedwatch-golden/kubepods/burstable"}
    for read in range(1, 5):
        clock.now = 15.0 * read
        totals = {entry: ns + SECOND for entry, ns in totals.items()}
        totals[(WAITER, NOW, 9)] = 10 * SECOND * read
        probe.snapshot = snapshot(totals)
        seen.append(neighbour_series(sched))
    before_hold, after_hold = seen[3], seen[4]  # at 45 s the old three are held; at 60 s the weakest gives way
    assert "/schedwatch-golden/kubepods" not in before_hold and before_hold[OTHER_NEIGHBOURS[0]] == 30.0
    assert after_hold["/schedwatch-golden/kubepods"] == 10.0  # counted from the read that named it
    assert len(after_hold) == 4  # three named and (other)
    assert sum(after_hold.values()) == sum(totals.values()) / SECOND == 3 * 104 + 40
    for earlier, later in itertools.pairwise(seen):
        for name, value in earlier.items():
            assert later.get(name, value) >= value, (name, earlier, later)


def test_a_pair_the_kernel_evicted_and_made_again_counts_on_from_its_last_read() -> None:
    """An LRU eviction: the pair's entry goes (its last 2 s unread are lost), then a new entry (a new *since*) counts
    from 0; its series goes on from what was read, never backwards, even when the new entry's count is past the old."""
    clock = Clock()
    probe = FixtureProbe(snapshot({(WAITER, OLD[0], 5): 30 * SECOND}), [])
    sched = collector(probe, clock)
    assert neighbour_series(sched) == {"/": 30.0}
    probe.snapshot = snapshot({})  # evicted
    assert neighbour_series(sched) == {"/": 30.0}
    probe.snapshot = snapshot({(WAITER, OLD[0], 8): 40 * SECOND})  # made again, 40 s since
    assert neighbour_series(sched) == {"/": 70.0}
    probe.snapshot = snapshot({(WAITER, OLD[0], 8): 41 * SECOND})
    assert neighbour_series(sched) == {"/": 71.0}


def test_a_pair_of_two_cgroups_of_one_workload_is_no_neighbour() -> None:
    pod = "/schedwatch-golden/kubepods/burstable/pod6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
    probe = FixtureProbe(snapshot({(IDS[pod], IDS[pod], 1): SECOND, (WAITER, WAITER, 1): SECOND}), [])
    assert neighbour_series(collector(probe, Clock())) == {}
