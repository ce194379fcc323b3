"""Per-workload totals that never go backwards.

Kernel maps hold one entry per source (a cgroup id). Several sources can share one
label set (a container with nested cgroups, a service restarted into a new cgroup
with the same path), and sources go away (a removed cgroup's entry is deleted from
the map). :class:`CounterTable` sums sources per label set and folds the last values
of a source that went away into its label set, so exported counters stay monotonic.
A label set with no live source is dropped after a grace period, except the ones
marked as kept forever (the catch-all for cgroups removed before they were seen).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

Labels = tuple[str, ...]


@dataclass
class _LabelSetState:
    retired: list[int]
    live_sources: set[Hashable] = field(default_factory=set)
    last_seen: float = 0.0


class CounterTable:
    """Sums vectors of monotonic counters from many sources into per-label-set totals."""

    def __init__(
        self,
        width: int,
        grace_seconds: float,
        keep_forever: frozenset[Labels] = frozenset(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.width = width
        self.grace_seconds = grace_seconds
        self.keep_forever = keep_forever
        self._clock = clock
        self._sources: dict[Hashable, tuple[Labels, tuple[int, ...]]] = {}
        self._label_sets: dict[Labels, _LabelSetState] = {}
        self._totals: dict[Labels, tuple[int, ...]] = {}  # made by rows(); dropped when the label set changes

    def update(self, live: Mapping[Hashable, tuple[Labels, Sequence[int]]]) -> None:
        """Record this round's values of every live source; sources absent from *live* are retired.

        When a known source arrives with new labels (a container whose name became known), its whole label
        set moves to the new labels, history included, so no series ever goes backwards.
        """
        now = self._clock()
        for source in list(self._sources):
            if source not in live:
                self._retire(source)
        for source, (labels, given) in live.items():
            if len(given) != self.width:
                raise ValueError(f"expected {self.width} values, got {len(given)}")
            values = given if type(given) is tuple else tuple(given)  # kept as given when it is a tuple already
            known = self._sources.get(source)
            if known is not None and known[0] == labels and (known[1] is values or known[1] == values):
                self._label_sets[labels].last_seen = now  # unchanged: nothing else to do
                continue
            self._totals.pop(labels, None)
            if known is not None and known[0] != labels:
                self._move(known[0], labels)
                known = self._sources[source]
            if known is not None:
                previous = known[1]
                if any(map(operator.lt, values, previous)):
                    # The kernel entry was recreated: keep what it had counted before.
                    self._fold(labels, previous)
            state = self._label_sets.setdefault(labels, _LabelSetState(retired=[0] * self.width))
            state.live_sources.add(source)
            state.last_seen = now
            self._sources[source] = (labels, values)
        self._expire(now)

    def labels_of(self, source: Hashable) -> Labels | None:
        """The labels a live source is counted under, if it is known."""
        known = self._sources.get(source)
        return None if known is None else known[0]

    def rows(self) -> Iterator[tuple[Labels, tuple[int, ...]]]:
        """(labels, totals) for every label set still exported; the same tuple again while a label set's totals
        stand."""
        made = self._totals
        for labels, state in self._label_sets.items():
            totals = made.get(labels)
            if totals is None:
                sums = list(state.retired)
                for source in state.live_sources:
                    sums = [total + value for total, value in zip(sums, self._sources[source][1], strict=True)]
                totals = made[labels] = tuple(sums)
            yield labels, totals

    def __len__(self) -> int:
        return len(self._label_sets)

    def _retire(self, source: Hashable) -> None:
        labels, values = self._sources.pop(source)
        self._fold(labels, values)
        self._label_sets[labels].live_sources.discard(source)

    def _move(self, old: Labels, new: Labels) -> None:
        """Merge label set *old* into *new*: retired counts and live sources."""
        moving = self._label_sets.pop(old)
        self._totals.pop(old, None)
        self._totals.pop(new, None)
        target = self._label_sets.setdefault(new, _LabelSetState(retired=[0] * self.width))
        target.retired = [a + b for a, b in zip(target.retired, moving.retired, strict=True)]
        target.live_sources |= moving.live_sources
        target.last_seen = max(target.last_seen, moving.last_seen)
        for source in moving.live_sources:
            self._sources[source] = (new, self._sources[source][1])

    def _fold(self, labels: Labels, values: Sequence[int]) -> None:
        self._totals.pop(labels, None)
        retired = self._label_sets[labels].retired
        for index, value in enumerate(values):
            retired[index] += value

    def _expire(self, now: float) -> None:
        for labels, state in list(self._label_sets.items()):
            if state.live_sources or labels in self.keep_forever:
                continue
            if now - state.last_seen > self.grace_seconds:
                del self._label_sets[labels]
                self._totals.pop(labels, None)
