"""Scrape and index a live /metrics endpoint."""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from tests.support.slowdown import slowdown

Sample = tuple[str, frozenset[tuple[str, str]]]


class Scrape:
    """One scrape: samples indexed by (sample name, label set)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[Sample, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the one sample whose labels include *labels*; None if absent; error if ambiguous."""
        found = self.find(name, **labels)
        if not found:
            return None
        if len(found) > 1:
            raise AssertionError(f"{name}{labels} matches {len(found)} samples: {found}")
        return next(iter(found.values()))

    def find(self, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        """Every sample of *name* whose labels include *labels*."""
        wanted = set(labels.items())
        return {lbls: v for (n, lbls), v in self.samples.items() if n == name and wanted <= lbls}


def scrape(url: str, timeout: float = 60.0) -> Scrape:
    """GET *url* and parse it."""
    timeout *= slowdown()
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return Scrape(response.read().decode())


def labels_dict(labels: frozenset[tuple[str, str]] | Mapping[str, str]) -> dict[str, str]:
    """A plain dict of a label set."""
    return dict(labels)


def missed_switches(scrape: Scrape, **labels: str) -> int:
    """Switches the kernel did not deliver to the workload's threads (missed switch-ins), each losing one off-CPU
    period. The series exists only once one was missed, so its absence is 0 here: use this only to loosen a
    bound, never to assert that nothing was missed."""
    return int(scrape.value("schedwatch_sched_events_missed_total", event="switch_in", **labels) or 0)


def cgroup_value(scrape: Scrape, name: str, cgroup: str, **labels: str) -> float:
    """The value of a plain cgroup's series (not a container's), which must exist: a missing series is a failure,
    never 0."""
    value = scrape.value(name, cgroup=cgroup, container_id="", **labels)
    top = cgroup.split("/")[1] if "/" in cgroup else cgroup
    near = [dict(k) for k in scrape.find(name) if top in dict(k).get("cgroup", "")]
    assert value is not None, f"no series {name}{{cgroup={cgroup!r}, {labels}}} in the scrape; nearby: {near}"
    return value
