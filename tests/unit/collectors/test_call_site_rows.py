"""Call sites from the kernel map to exported rows: each site's growth counted once (a read that finds a site's calls
between a CPU's last-site slot and the map counts them at the next), an exited process's entries deleted after their
last read and their counts kept, the busiest workloads named, the rest in (other)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import SimpleNamespace

from agent.bpf.probes.base import ProbeLimits
from agent.bpf.probes.syscalls import CallSite, compile_defines
from agent.collectors.common.call_sites import CallSiteRows
from agent.identity.placement import Placement
from agent.identity.resolver import Identity, IdentityResolver
from agent.symbols.symbolizer import CodeName, Symbolizer

POOL, OTHER_WORKLOAD, CONTAINER = 11, 12, 13
CONTAINER_ID = "ab" * 32
CONTAINER_PATH = f"/system.slice/docker-{CONTAINER_ID}.scope"
PATHS = {POOL: "/pool", OTHER_WORKLOAD: "/other", CONTAINER: CONTAINER_PATH}


class Keys:
    """Cgroup keys that are always where PATHS says."""

    per_process = False
    place_hierarchy = -1
    healthy = True

    def place(self, keys: Iterable[int]) -> dict[int, Placement]:
        return {key: Placement(key, PATHS[key], False) for key in keys}


class Names(Symbolizer):
    """The caller's name is its address in hex (a stand-in for a process's maps)."""

    def call_site(self, pid: int, ip: int, caller: int) -> CodeName:
        return CodeName("app", "", f"f{caller:x}")


def rows_of(sites: CallSiteRows, cgroup: str) -> dict[str, int]:
    labels = ("", "", "", "", cgroup)
    return {row[2]: count for row, count in sites.rows_of("sched_yield", labels)}


def forgetting(
    forgotten: list[CallSite], held: frozenset[int] = frozenset()
) -> Callable[[list[CallSite]], list[CallSite]]:
    """A probe's forget_call_sites: deletes the entries of *sites* but those whose caller a CPU still holds calls of."""

    def forget(sites: list[CallSite]) -> list[CallSite]:
        deleted = [site for site in sites if site.caller not in held]
        forgotten.extend(deleted)
        return deleted

    return forget


def make(
    alive: set[int],
    forgotten: list[CallSite],
    named_workloads: int = 16,
    held: frozenset[int] = frozenset(),
    clock: Callable[[], float] = lambda: 0.0,
) -> CallSiteRows:
    return CallSiteRows(
        Keys(),  # type: ignore[arg-type]
        IdentityResolver([]),
        Names(),
        top_k=2,
        named_workloads=named_workloads,
        grace_seconds=300,
        forget=forgetting(forgotten, held),
        alive=lambda tgid: tgid in alive,
        clock=clock,
    )


def yields(workload: int, tgid: int, caller: int, count: int) -> CallSite:
    return CallSite(workload, tgid, "sched_yield", 0x1000, caller, count)


def test_each_read_adds_what_an_entry_grew_and_exited_processes_keep_their_counts() -> None:
    forgotten: list[CallSite] = []
    alive = {100}
    sites = make(alive, forgotten)
    sites.update([yields(POOL, 100, 0xA, 30), yields(POOL, 100, 0xB, 10)])
    sites.update([yields(POOL, 100, 0xA, 50), yields(POOL, 100, 0xB, 10)])
    assert rows_of(sites, "/pool") == {"fa": 50, "fb": 10}
    alive.clear()  # it exited after counting 5 more
    sites.update([yields(POOL, 100, 0xA, 55), yields(POOL, 100, 0xB, 10)])
    assert rows_of(sites, "/pool") == {"fa": 55, "fb": 10}
    assert len(forgotten) == 2
    sites.update([])  # the entries are gone from the map: nothing is lost
    assert rows_of(sites, "/pool") == {"fa": 55, "fb": 10}


def test_a_workload_whose_processes_all_exited_goes_on_from_its_last_counts_when_a_new_one_counts() -> None:
    """The exited-process case where a futex-waits-by-site counter once went 2 -> 1: every process of a cgroup exited,
    its rows expired after the grace period (no live site kept them), and the cgroup's next process started them
    again from zero. They now go on from what they showed."""
    now = [0.0]
    alive = {100}
    sites = make(alive, [], clock=lambda: now[0])
    sites.update([yields(POOL, 100, 0xA, 2)])
    alive.clear()
    sites.update([yields(POOL, 100, 0xA, 2)])  # its last read: the entries are deleted
    assert rows_of(sites, "/pool") == {"fa": 2}
    now[0] = 301.0
    sites.update([])  # gone and quiet for the grace period: no longer exported
    assert rows_of(sites, "/pool") == {}
    alive.add(101)
    sites.update([yields(POOL, 101, 0xA, 1), yields(POOL, 101, 0xB, 4)])
    assert rows_of(sites, "/pool") == {"fa": 3, "fb": 4}


def test_calls_a_read_finds_neither_pending_nor_in_the_map_are_counted_once_at_the_next_read() -> None:
    sites = make({100}, [])
    sites.update([yields(POOL, 100, 0xA, 30), yields(POOL, 100, 0xB, 7)])  # 7 pending on a CPU, not yet in the map
    sites.update([yields(POOL, 100, 0xA, 40)])  # B's 7 left the CPU's slot after the map was read: not seen
    assert rows_of(sites, "/pool") == {"fa": 40, "fb": 7}
    sites.update([yields(POOL, 100, 0xA, 41), yields(POOL, 100, 0xB, 7)])  # now in the map
    sites.update([yields(POOL, 100, 0xA, 35 + 6), yields(POOL, 100, 0xB, 9)])  # A's 6 pending missed, 2 more of B
    assert rows_of(sites, "/pool") == {"fa": 41, "fb": 9}
    sites.update([yields(POOL, 100, 0xA, 45), yields(POOL, 100, 0xB, 9)])
    assert rows_of(sites, "/pool") == {"fa": 45, "fb": 9}


def test_a_site_a_cpu_still_holds_calls_of_is_forgotten_only_once_they_reached_the_map() -> None:
    forgotten: list[CallSite] = []
    sites = make(set(), forgotten, held=frozenset({0xA}))
    sites.update([yields(POOL, 100, 0xA, 30), yields(POOL, 100, 0xB, 10)])  # the process has exited
    assert [site.caller for site in forgotten] == [0xB]
    sites.update([yields(POOL, 100, 0xA, 30)])  # still held: read again, not counted again
    assert rows_of(sites, "/pool") == {"fa": 30, "fb": 10}


def test_beyond_the_top_rows_the_rest_is_other_and_the_total_is_kept() -> None:
    sites = make({100}, [])
    sites.update([yields(POOL, 100, caller, 10 * caller) for caller in (1, 2, 3, 4)])
    assert rows_of(sites, "/pool") == {"f4": 40, "f3": 30, "(other)": 30}


def test_only_the_busiest_workloads_are_named() -> None:
    sites = make({100, 200}, [], named_workloads=1)
    sites.update([yields(POOL, 100, 0xA, 1000), yields(OTHER_WORKLOAD, 200, 0xB, 5)])
    assert rows_of(sites, "/pool") == {"fa": 1000}
    assert rows_of(sites, "/other") == {"(other)": 5}


def test_call_sites_are_compiled_in_on_x86_64_only_when_asked() -> None:
    with_sites = compile_defines(ProbeLimits(), None, 4096)
    assert with_sites.get("MAX_CALL_SITES") in (4096, None)  # None: another architecture
    assert with_sites.get("MAX_CPUS", 1) >= 1
    assert "CALL_SITES" not in compile_defines(ProbeLimits(), None, 0)


def test_a_container_named_after_its_first_reads_keeps_one_series_under_its_names() -> None:
    runtime: dict[str, Identity] = {}
    sites = CallSiteRows(
        Keys(),  # type: ignore[arg-type]
        SimpleNamespace(get=runtime.get),  # type: ignore[arg-type]
        Names(),
        top_k=2,
        named_workloads=16,
        grace_seconds=300,
        forget=forgetting([]),
        alive=lambda tgid: True,
    )
    id_only = (CONTAINER_ID, "", "", "", "")
    sites.update([yields(CONTAINER, 100, 0xA, 30)])
    assert {row[2]: count for row, count in sites.rows_of("sched_yield", id_only)} == {"fa": 30}
    runtime[CONTAINER_ID] = Identity("trainer", "pool-0", "ml", frozenset({CONTAINER_PATH}))
    sites.update([yields(CONTAINER, 100, 0xA, 31)])
    named = (CONTAINER_ID, "trainer", "pool-0", "ml", "")
    assert sites.rows_of("sched_yield", id_only) == []
    assert {row[2]: count for row, count in sites.rows_of("sched_yield", named)} == {"fa": 31}


class CountingKeys(Keys):
    """Keys that remember which were placed."""

    def __init__(self) -> None:
        self.placed: list[int] = []

    def place(self, keys: Iterable[int]) -> dict[int, Placement]:
        keys = list(keys)
        self.placed.extend(keys)
        return super().place(keys)


def test_ticks_between_scrapes_look_only_at_sites_that_counted_and_end_where_scrapes_alone_would() -> None:
    reads = [
        [yields(POOL, 100, 0xA, 30), yields(OTHER_WORKLOAD, 200, 0xB, 10)],
        [yields(POOL, 100, 0xA, 45), yields(OTHER_WORKLOAD, 200, 0xB, 10)],  # a tick: only the pool counted
        [yields(POOL, 100, 0xA, 60), yields(OTHER_WORKLOAD, 200, 0xB, 12)],
    ]
    checked: list[int] = []

    def alive(tgid: int) -> bool:
        checked.append(tgid)
        return True

    keys = CountingKeys()
    ticked = CallSiteRows(
        keys,  # type: ignore[arg-type]
        IdentityResolver([]),
        Names(),
        2,
        16,
        300,
        forget=lambda _sites: None,
        alive=alive,
    )
    scraped = make({100, 200}, [])
    ticked.update(reads[0])
    keys.placed.clear()
    checked.clear()
    ticked.update(reads[1], settle=False)
    assert keys.placed == [POOL]  # the idle workload's site was not placed again
    assert checked == []  # nor was any process looked for
    ticked.update(reads[2])
    scraped.update(reads[0])
    scraped.update(reads[2])
    for cgroup in ("/pool", "/other"):
        assert rows_of(ticked, cgroup) == rows_of(scraped, cgroup)
    assert rows_of(ticked, "/pool") == {"fa": 60}
    assert rows_of(ticked, "/other") == {"fb": 12}
