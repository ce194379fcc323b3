"""Per-workload counts by row (a library and function, say), exported as the top-k rows plus one ``(other)`` row, every
exported counter monotonic while the set of top rows changes.

Each row's count only grows. A row becomes *named* (exported under its own labels) when it is among the busiest of
an update and a slot is free; from then on its series counts what it gains from the update that named it (its
earlier counts stay in ``(other)``). ``(other)`` is every count not in a named series: the total less the named
series. So each named series grows with its row, and ``(other)`` grows by the gains of the rows that are not named:
no exported counter ever goes backwards. When every slot is taken, a row that gained more than REPLACE_FACTOR times
what the weakest named row gained in the same update takes that row's slot, once the weakest has been named for
``hold_seconds`` (so that the set does not flap): the weaker row's series ends, its count passes to ``(other)``
(which therefore still grows). It may be named again only ``hold_seconds`` after it lost its slot, so that every
scrape in between (any scrape interval shorter than that) shows its series ended; the new series starts from what
the row gains then, a new series to Prometheus, never a counter that went backwards between two scrapes.

A workload gone and quiet for the grace period stops being exported, but what its series last showed is remembered
(EXPIRED_REMEMBERED workloads per table, the oldest forgotten first): if the same labels count again (a new process in
a cgroup whose earlier processes all exited), each series goes on from where it stopped, never from zero.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

Row = tuple[str, ...]
HOLD_SECONDS = 60.0  # a named row keeps its slot at least this long
REPLACE_FACTOR = 2.0  # a row busier than this many times the weakest named row takes its slot
TRACKED_ROWS = 512  # rows remembered per workload; the counts of rows beyond are in (other) for good
EXPIRED_REMEMBERED = 4096  # expired workloads whose exported series are remembered, per table (top-k + 1 numbers each)


@dataclass
class _Named:
    base: int  # the row's count when it was named
    named_at: float
    last_gain: int  # in the latest update


@dataclass
class RankedRows:
    """One workload's rows."""

    top_k: int
    hold_seconds: float = HOLD_SECONDS
    counts: dict[Row, int] = field(default_factory=dict)
    total: int = 0
    named: dict[Row, _Named] = field(default_factory=dict)
    demoted: dict[Row, float] = field(default_factory=dict)  # rows that lost their slot, and when

    def add(self, gains: Mapping[Row, int], now: float, unnamed: Row | None = None) -> None:
        """Add what each row gained since the last update, then fill or hand over named slots (never to the row
        *unnamed*: the rest row's own labels, under which a workload not looked at closely is counted)."""
        for row, gain in gains.items():
            if gain <= 0:
                continue
            self.total += gain
            if row in self.counts or len(self.counts) < TRACKED_ROWS:
                self.counts[row] = self.counts.get(row, 0) + gain
        candidates = sorted(
            (
                row
                for row, gain in gains.items()
                if gain > 0
                and row not in self.named
                and row in self.counts
                and row != unnamed
                and self._may_name(row, now)
            ),
            key=lambda row: (-gains[row], row),
        )
        for row, named in self.named.items():
            named.last_gain = max(0, gains.get(row, 0))
        for row in candidates:
            if len(self.named) >= self.top_k and not self._free_a_slot(now, gains[row]):
                break
            self.named[row] = _Named(base=self.counts[row] - gains[row], named_at=now, last_gain=gains[row])
            self.demoted.pop(row, None)

    def _may_name(self, row: Row, now: float) -> bool:
        """Whether *row* may be named: never named before, or out of its slot for hold_seconds."""
        demoted_at = self.demoted.get(row)
        return demoted_at is None or now - demoted_at >= self.hold_seconds

    def _free_a_slot(self, now: float, gain: int) -> bool:
        """Demote the weakest named row held long enough, if *gain* beats it by REPLACE_FACTOR."""
        held = [row for row, named in self.named.items() if now - named.named_at >= self.hold_seconds]
        weakest = min(held, key=lambda row: (self.named[row].last_gain, row), default=None)
        if weakest is None or gain <= REPLACE_FACTOR * self.named[weakest].last_gain:
            return False
        del self.named[weakest]
        self.demoted[weakest] = now
        return True

    def absorb(self, earlier: RankedRows) -> None:
        """Take in the counts of *earlier*, the same workload's rows under the labels it had before: every named
        series and (other) grow by what they take, so none goes backwards."""
        for row, count in earlier.counts.items():
            if row in self.counts or len(self.counts) < TRACKED_ROWS:
                self.counts[row] = self.counts.get(row, 0) + count
        self.total += earlier.total

    def resumable(self) -> RankedRows:
        """Only what the exported series show (each named row's count, and the rest): a later update goes on from
        there as this workload would, while the rows no series shows are forgotten (they were in ``(other)``)."""
        resumed = RankedRows(self.top_k, self.hold_seconds, total=self.total)
        for row, named in self.named.items():
            resumed.counts[row] = self.counts[row] - named.base
            resumed.named[row] = _Named(base=0, named_at=named.named_at, last_gain=0)
        return resumed

    def rows(self, other: Row) -> list[tuple[Row, int]]:
        """(row, exported count) of each named row, busiest first, then *other* with the rest (when there is any)."""
        exported = sorted(
            ((row, self.counts[row] - named.base) for row, named in self.named.items()), key=lambda item: -item[1]
        )
        rest = self.total - sum(count for _row, count in exported)
        return [*exported, (other, rest)] if rest > 0 else exported


class RankedTable:
    """RankedRows per workload (by its labels), dropped once the workload is gone and quiet for *grace_seconds*."""

    def __init__(
        self, top_k: int, grace_seconds: float, other: Row, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.top_k = top_k
        self.other = other
        self.grace_seconds = grace_seconds
        self._clock = clock
        self._workloads: dict[Hashable, RankedRows] = {}
        self._last_gain: dict[Hashable, float] = {}
        self._expired: OrderedDict[Hashable, RankedRows] = OrderedDict()  # what expired workloads last exported

    def add(self, gains: Mapping[Hashable, Mapping[Row, int]]) -> None:
        """This round's gains by workload and row."""
        now = self._clock()
        for workload, rows in gains.items():
            if not any(gain > 0 for gain in rows.values()):
                continue
            ranked = self._kept(workload)
            if ranked is None:
                ranked = self._workloads[workload] = RankedRows(self.top_k)
            ranked.add(rows, now, self.other)
            self._last_gain[workload] = now

    def rename(self, old: Hashable, new: Hashable) -> None:
        """The workload kept as *old* is now *new* (a container named once its runtime answered): its rows move,
        into *new*'s if it has some already."""
        ranked = self._workloads.pop(old, None)
        if ranked is None:
            return
        last_gain = self._last_gain.pop(old, self._clock())
        kept = self._kept(new)
        if kept is None:
            self._workloads[new] = ranked
        else:
            kept.absorb(ranked)
        self._last_gain[new] = max(last_gain, self._last_gain.get(new, last_gain))

    def expire(self, live: Iterable[Hashable]) -> None:
        """Drop the workloads not in *live* that have gained nothing for grace_seconds."""
        now, alive = self._clock(), set(live)
        for workload in list(self._workloads):
            if workload not in alive and now - self._last_gain.get(workload, now) > self.grace_seconds:
                self._expired[workload] = self._workloads.pop(workload).resumable()
                self._expired.move_to_end(workload)
                if len(self._expired) > EXPIRED_REMEMBERED:
                    self._expired.popitem(last=False)
                self._last_gain.pop(workload, None)

    def _kept(self, workload: Hashable) -> RankedRows | None:
        """The rows of *workload*, taken back from the expired ones if it expired (so no series starts over)."""
        ranked = self._workloads.get(workload)
        if ranked is None:
            ranked = self._expired.pop(workload, None)
            if ranked is not None:
                self._workloads[workload] = ranked
        return ranked

    def items(self) -> list[tuple[Hashable, RankedRows]]:
        """(workload, its rows) of each workload kept."""
        return list(self._workloads.items())

    def get(self, workload: Hashable) -> RankedRows | None:
        """The rows of *workload*, if kept."""
        return self._workloads.get(workload)

    def __len__(self) -> int:
        return len(self._workloads)
