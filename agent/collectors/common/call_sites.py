"""Yields and futex waits by call site (bpf/syscalls.bpf.c's `call_sites`): each site's gain since the last read,
named for the busiest workloads, kept as monotonic top-k rows per workload; entries of exited processes deleted
after their last read."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.syscalls import SITE_KINDS, CallSite
from agent.collectors.common.code_rows import OTHER_CODE, add_rows, busiest, gains_by_workload, renamed, safe_row
from agent.collectors.common.ranked_rows import RankedTable, Row
from agent.identity.placement import KeySpace
from agent.identity.workload import Identities, workload_for_cgroup
from agent.model import Labels
from agent.symbols.symbolizer import Symbolizer

SiteKey = tuple[int, int, str, int, int]  # workload, tgid, kind, ip, caller
FAMILY_OF_KIND = {"sched_yield": metrics.SCHED_YIELD_CALLS_BY_SITE, "futex_wait": metrics.FUTEX_WAITS_BY_SITE}


class SiteChooser:
    """Which workloads' call sites to count until the next scrape: the *size* whose yields and futex waits grew the
    most since the last choice (any growth), busiest first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._last: dict[int, int] = {}

    def choose(self, calls: dict[int, int]) -> list[int]:
        """The keys to count the sites of, given each workload key's yields and futex waits so far."""
        grown = {key: total - self._last.get(key, 0) for key, total in calls.items()}
        self._last = dict(calls)
        busy = [key for key, growth in grown.items() if growth > 0]
        return sorted(busy, key=lambda key: grown[key], reverse=True)[: self.size]


def process_alive(tgid: int) -> bool:
    """Whether process *tgid* still exists (in the agent's pid namespace, which is the program's in sidecar mode)."""
    return os.path.exists(f"/proc/{tgid}")


def _key(site: CallSite) -> SiteKey:
    return (site.workload, site.tgid, site.kind, site.ip, site.caller)


class CallSiteRows:
    """Per kind of call, each workload's calls by the function that made them."""

    def __init__(
        self,
        keys: KeySpace,
        identities: Identities,
        symbolizer: Symbolizer,
        top_k: int,
        named_workloads: int,
        grace_seconds: float,
        forget: Callable[[list[CallSite]], list[CallSite]],
        alive: Callable[[int], bool] = process_alive,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = keys
        self._identities = identities
        self._symbolizer = symbolizer
        self._named_workloads = named_workloads
        self._forget = forget
        self._alive = alive
        self._tables = {kind: RankedTable(top_k, grace_seconds, OTHER_CODE, clock) for kind in SITE_KINDS}
        self._last: dict[SiteKey, int] = {}
        self._labels_of: dict[int, Labels] = {}  # each placed key's labels at the last read

    def update(self, sites: list[CallSite], settle: bool = True) -> None:
        """Fold one read of the map in. With *settle* (at scrapes) every entry is placed, the rows of gone workloads
        expire and the entries of processes that have exited (read for the last time) are deleted; without it (the
        ticks between scrapes, which only name addresses while their processes live) only the entries that counted
        since the last read are looked at: an idle workload's sites cost a dictionary lookup per tick."""
        if not settle:
            sites = [site for site in sites if site.count > self._last.get(_key(site), 0)]
        places = self._keys.place({site.workload for site in sites})
        labels_of: dict[int, Labels] = {
            key: workload_for_cgroup(place.path, self._identities).labels() for key, place in places.items()
        }
        placed = {key: labels_of[key] for key, place in places.items() if place.path is not None}
        for old, new in renamed(self._labels_of, placed).items():
            for table in self._tables.values():
                table.rename(old, new)
        self._labels_of = placed if settle else {**self._labels_of, **placed}
        by_kind: dict[str, list[tuple[Labels, CallSite, int]]] = {kind: [] for kind in SITE_KINDS}
        seen = dict(self._last)  # a site missing from one read (its calls between a CPU and the map) is still there
        live: set[Hashable] = set()
        for site in sites:
            key = _key(site)
            # A read can find a site's calls neither pending on a CPU nor yet in its entry: they show at the next one.
            last = self._last.get(key, 0)
            seen[key] = max(site.count, last)
            gain = max(site.count - last, 0)
            place = places[site.workload]
            labels = labels_of[site.workload]
            if place.path is not None and not place.final:
                live.add(labels)
            if gain:
                by_kind[site.kind].append((labels, site, gain))
        self._symbolizer.next_round()
        for kind, items in by_kind.items():
            per_workload: dict[Labels, int] = {}
            for labels, _site, gain in items:
                per_workload[labels] = per_workload.get(labels, 0) + gain
            named = busiest(per_workload, self._named_workloads)
            table = self._tables[kind]
            table.add(gains_by_workload(items, named, self._row, OTHER_CODE))
            if settle:
                table.expire(live)
        if not settle:
            self._last = seen
            return
        alive = {tgid: self._alive(tgid) for tgid in {site.tgid for site in sites}}
        finished = [site for site in sites if not alive[site.tgid]]
        if finished:
            for site in self._forget(finished):
                seen.pop(_key(site), None)
        self._last = seen

    def _row(self, site: CallSite) -> Row:
        code = self._symbolizer.call_site(site.tgid, site.ip, site.caller)
        return safe_row((code.library, code.version, code.function))

    def families(self) -> list[Metric]:
        """Yields and futex waits by site, per workload."""
        families: list[Metric] = []
        for kind, table in self._tables.items():
            family = FAMILY_OF_KIND[kind].family()
            add_rows(family, table, OTHER_CODE)
            families.append(family)
        return families

    def rows_of(self, kind: str, labels: Labels) -> list[tuple[Row, int]]:
        """A workload's exported rows of *kind* (for tests and the in-process diagnosis)."""
        ranked = self._tables[kind].get(labels)
        return [] if ranked is None else ranked.rows(OTHER_CODE)
