"""What the code-attribution collectors share: naming a round's addresses for the busiest workloads only, and
exporting each workload's top rows plus (other) from a RankedTable."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

from agent.collectors.common.ranked_rows import RankedTable, Row
from agent.exposition.family import Family
from agent.identity.labels import label_value
from agent.model import Labels
from agent.symbols.names import OTHER

Item = TypeVar("Item")


def busiest(counts: dict[Labels, int], how_many: int) -> set[Labels]:
    """The *how_many* workloads with the most counts (ties by labels, so the choice is stable)."""
    return set(sorted(counts, key=lambda labels: (-counts[labels], labels))[:how_many])


def gains_by_workload(
    items: Iterable[tuple[Labels, Item, int]], named: set[Labels], name: Callable[[Item], Row], other: Row
) -> dict[Hashable, dict[Row, int]]:
    """This round's gains by workload and row: each item of a *named* workload under the row *name* gives it, the
    items of the others under *other*."""
    gains: dict[Hashable, dict[Row, int]] = {}
    for labels, item, count in items:
        row = name(item) if labels in named else other
        rows = gains.setdefault(labels, {})
        rows[row] = rows.get(row, 0) + count
    return gains


def renamed(before: Mapping[int, Labels], now: Mapping[int, Labels]) -> dict[Labels, Labels]:
    """Workloads whose labels changed since the last round (a container is named by its id alone until its runtime
    answers): old labels -> new, for each old label set whose keys placed now (*now*: by key) all have the same new
    labels. A key not in *now* (gone before it could be placed again) does not move its workload."""
    targets: dict[Labels, set[Labels]] = {}
    for key, labels in now.items():
        old = before.get(key)
        if old is not None:
            targets.setdefault(old, set()).add(labels)
    return {old: next(iter(new)) for old, new in targets.items() if len(new) == 1 and old not in new}


def safe_row(row: Row) -> Row:
    """A row's names as label values (a symbol or file name is the tenant's)."""
    return tuple(label_value(part) for part in row)


def add_rows(family: Family, table: RankedTable, other: Row) -> None:
    """Each workload's named rows and its (other) row into *family*."""
    for labels, ranked in table.items():
        for row, count in ranked.rows(other):
            family.add_metric((*labels, *row), count)  # type: ignore[misc]


OTHER_CODE: Row = (OTHER, "", OTHER)
