"""Per-workload totals fed by a kernel map keyed by workload key (cgroup id, or process): placed, kept monotonic,
followed across moves, and the kernel entries of gone workloads freed once folded in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

from agent.identity.placement import KeySpace, Placement
from agent.identity.workload import REMOVED, UNRESOLVED, Identities, workload_for_cgroup
from agent.model import CounterTable, Labels


class CgroupTotals:
    """Per-workload totals fed by a kernel map keyed by workload key (cgroup id, or process).

    Places each key (agent.identity.placement), keeps the totals monotonic (agent.model), and frees the kernel entries
    of gone cgroups and exited processes once their final values are folded in. A process that moves to another
    cgroup (keyed by process) leaves what it counted so far where it was, and counts on from there in its new place.
    """

    def __init__(
        self,
        keys: KeySpace,
        identities: Identities,
        width: int,
        grace_seconds: float,
        forget: Callable[[list[int]], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = keys
        self._identities = identities
        self._forget = forget
        self._table = CounterTable(width, grace_seconds, keep_forever=frozenset({REMOVED.labels()}), clock=clock)
        self._moves: dict[Hashable, _Moved] = {}  # per process source: where it was and what it had counted there
        self._grace_seconds = grace_seconds
        self._clock = clock
        # Sources whose kernel entries were deleted as final, with their labels and when: a gone task's last
        # scheduler event (its final switch runs after it left its cgroup) can make the entry again.
        self._finalized: dict[Hashable, tuple[Labels, float]] = {}

    def update(
        self,
        vectors: dict[int, Sequence[int]],
        read_again: Callable[[list[int]], dict[int, Sequence[int]]] | None = None,
    ) -> None:
        """This scrape's counter vector of every key in the kernel map. *read_again* reads keys' vectors anew: a key
        found final (its cgroup or process gone) may have counted on between the map's read and that finding, and
        cannot count any more, so what it says now is its last value."""
        placements = self._keys.place(vectors)
        healthy = self._keys.healthy
        if read_again is not None:
            final_keys = [key for key, placement in placements.items() if placement.final]
            if final_keys:
                vectors = {**vectors, **read_again(final_keys)}
        by_source: dict[Hashable, tuple[Placement, Sequence[int]]] = {}
        final = []
        for key, vector in vectors.items():
            placement = placements[key]
            if placement.final:
                final.append(key)
            seen = by_source.get(placement.source)
            if seen is not None:  # a process's live and exited entries, both read mid-move
                vector = [max(a, b) for a, b in zip(seen[1], vector, strict=True)]
                placement = seen[0] if placement.path is None else placement
            by_source[placement.source] = (placement, vector)
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        final_sources = {placements[key].source for key in final}
        finalized: dict[Hashable, Labels] = {}
        for source, (placement, vector) in by_source.items():
            table_source, counted = self._follow_moves(source, placement.path, vector)
            if placement.path is None and healthy:
                # Gone before it was placed, or made again after its entry was deleted: keep counting it where it
                # was counted while its series lasts.
                labels = self._table.labels_of(table_source) or self._finalized_labels(table_source) or REMOVED.labels()
            elif healthy:
                labels = workload_for_cgroup(placement.path, self._identities).labels()
            else:
                labels = UNRESOLVED.labels()
            live[table_source] = (labels, counted)
            if source in final_sources and labels not in (REMOVED.labels(), UNRESOLVED.labels()):
                finalized[source] = labels
        self._moves = {source: moved for source, moved in self._moves.items() if source in by_source}
        self._table.update(live)
        if final:
            self._remember_finalized(finalized)
            self._forget(final)
            self._keys.forget(final)

    def _finalized_labels(self, source: Hashable) -> Labels | None:
        """The labels of a source deleted as final within the grace period, if it was."""
        known = self._finalized.get(source)
        return None if known is None or self._clock() - known[1] > self._grace_seconds else known[0]

    def _remember_finalized(self, finalized: dict[Hashable, Labels]) -> None:
        """Note the labels of the sources deleted now; forget those noted longer ago than the grace period."""
        now = self._clock()
        self._finalized = {
            source: known for source, known in self._finalized.items() if now - known[1] <= self._grace_seconds
        }
        self._finalized.update((source, (labels, now)) for source, labels in finalized.items())

    def _follow_moves(
        self, source: Hashable, path: str | None, vector: Sequence[int]
    ) -> tuple[Hashable, Sequence[int]]:
        """The table source and values of *source* now: after a move, a new source counting from the move on."""
        moved = self._moves.get(source)
        if not self._keys.per_process or path is None:
            base = moved.base if moved else None
        elif moved is None:
            self._moves[source] = moved = _Moved(path, 0, None, list(vector))
            base = None
        else:
            if path != moved.path:  # the old table source is retired with what it counted until the last scrape
                moved.path, moved.generation, moved.base = path, moved.generation + 1, moved.last
            base = moved.base
            moved.last = list(vector)
        generation = moved.generation if moved else 0
        counted = vector if base is None else [now - then for now, then in zip(vector, base, strict=True)]
        return (source if generation == 0 else (source, generation)), counted

    def rows(self) -> Iterator[tuple[Labels, tuple[int, ...]]]:
        """(workload labels, totals) of every exported workload (the same tuple while they stand)."""
        return self._table.rows()

    def __len__(self) -> int:
        return len(self._table)


@dataclass
class _Moved:
    path: str
    generation: int
    base: list[int] | None  # the counts at the last move, subtracted from what the kernel says
    last: list[int]
