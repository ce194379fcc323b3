"""Top-k rows plus (other) per workload: every exported counter monotonic while the top rows change."""

from __future__ import annotations

import random

from agent.collectors.common.ranked_rows import EXPIRED_REMEMBERED, RankedRows, RankedTable

OTHER = ("(other)",)


def exported(ranked: RankedRows) -> dict[tuple[str, ...], int]:
    return dict(ranked.rows(OTHER))


def test_first_update_names_the_busiest_rows_with_all_they_counted() -> None:
    ranked = RankedRows(top_k=2)
    ranked.add({("a",): 50, ("b",): 30, ("c",): 20}, now=0.0)
    assert exported(ranked) == {("a",): 50, ("b",): 30, OTHER: 20}


def test_a_row_named_later_counts_from_the_update_that_named_it() -> None:
    ranked = RankedRows(top_k=2, hold_seconds=10)
    ranked.add({("a",): 50, ("b",): 30, ("c",): 20}, now=0.0)
    ranked.add({("a",): 5, ("c",): 40}, now=20.0)  # b gained 0, c 40: c takes b's slot
    assert exported(ranked) == {("a",): 55, ("c",): 40, OTHER: 20 + 30}
    assert sum(exported(ranked).values()) == ranked.total == 145


def test_a_named_row_keeps_its_slot_against_a_row_not_twice_as_busy() -> None:
    ranked = RankedRows(top_k=1, hold_seconds=10)
    ranked.add({("a",): 100}, now=0.0)
    ranked.add({("a",): 100, ("b",): 199}, now=100.0)
    assert exported(ranked) == {("a",): 200, OTHER: 199}


def test_a_named_row_keeps_its_slot_while_held() -> None:
    ranked = RankedRows(top_k=1, hold_seconds=60)
    ranked.add({("a",): 1}, now=0.0)
    ranked.add({("a",): 1, ("b",): 1000}, now=30.0)
    assert exported(ranked) == {("a",): 2, OTHER: 1000}
    ranked.add({("a",): 1, ("b",): 1000}, now=61.0)
    assert exported(ranked) == {("b",): 1000, OTHER: 1003}


def test_the_rest_row_is_never_named() -> None:
    ranked = RankedRows(top_k=3)
    ranked.add({OTHER: 100, ("a",): 1}, now=0.0, unnamed=OTHER)
    assert exported(ranked) == {("a",): 1, OTHER: 100}


def test_random_updates_never_make_an_exported_counter_go_backwards() -> None:
    generator = random.Random(24)
    ranked = RankedRows(top_k=3, hold_seconds=5)
    seen: dict[tuple[str, ...], int] = {}
    names = [(f"f{index}",) for index in range(12)]
    for step in range(400):
        gains = {row: generator.randrange(0, 30) for row in generator.sample(names, generator.randrange(1, 6))}
        ranked.add(gains, now=float(step))
        rows = exported(ranked)
        assert len(rows) <= 4
        assert sum(rows.values()) == ranked.total
        for row, value in rows.items():
            # A row that lost its slot is named again only after hold_seconds out of it: a new series, never one
            # that went backwards between two exports.
            assert value >= seen.get(row, 0), f"{row} went from {seen[row]} to {value} at step {step}"
            seen[row] = value
        for row in list(seen):
            if row not in rows:
                del seen[row]  # its series ended: a later one is a new series


def test_table_expires_only_gone_and_quiet_workloads() -> None:
    clock = [0.0]
    table = RankedTable(top_k=2, grace_seconds=30, other=OTHER, clock=lambda: clock[0])
    table.add({"live": {("a",): 1}, "gone": {("b",): 1}})
    clock[0] = 100.0
    table.expire(live=["live"])
    assert [workload for workload, _rows in table.items()] == ["live"]


def test_an_expired_workload_that_counts_again_goes_on_from_what_its_series_showed() -> None:
    clock = [0.0]
    table = RankedTable(top_k=1, grace_seconds=30, other=OTHER, clock=lambda: clock[0])
    table.add({"w": {("a",): 2, ("b",): 1}})
    clock[0] = 100.0
    table.expire(live=[])
    assert table.get("w") is None
    table.add({"w": {("a",): 1, ("c",): 1}})
    again = table.get("w")
    assert again is not None and exported(again) == {("a",): 3, OTHER: 1 + 1}


def test_expired_workloads_are_remembered_up_to_the_bound_oldest_forgotten_first() -> None:
    clock = [0.0]
    table = RankedTable(top_k=1, grace_seconds=30, other=OTHER, clock=lambda: clock[0])
    table.add({index: {("a",): 2} for index in range(EXPIRED_REMEMBERED + 1)})
    clock[0] = 100.0
    table.expire(live=[])
    table.add({0: {("a",): 1}, EXPIRED_REMEMBERED: {("a",): 1}})
    first, last = table.get(0), table.get(EXPIRED_REMEMBERED)
    assert first is not None and exported(first) == {("a",): 1}  # forgotten: a new series
    assert last is not None and exported(last) == {("a",): 3}


def test_a_renamed_workload_keeps_its_rows_and_no_counter_goes_backwards() -> None:
    table = RankedTable(top_k=1, grace_seconds=30, other=OTHER)
    table.add({"id-only": {("spin",): 40, ("read",): 5}})
    table.rename("id-only", "named")
    assert table.get("id-only") is None
    named = table.get("named")
    assert named is not None and exported(named) == {("spin",): 40, OTHER: 5}
    # Rows already counted under the new labels take the old ones in: each series grows by what it takes.
    table.add({"other-id": {("read",): 7, ("spin",): 1}})
    table.rename("named", "other-id")
    merged = table.get("other-id")
    assert merged is not None and exported(merged) == {("read",): 12, OTHER: 41}
    table.rename("no-such-workload", "other-id")
    assert len(table) == 1


def test_a_row_that_lost_its_slot_is_named_again_only_after_the_hold_so_no_series_goes_backwards() -> None:
    """The defect: at the root cgroup a row of 12,273 calls lost its slot at one tick and took another's at the next,
    its series showing 22 at the next scrape."""
    ranked = RankedRows(top_k=2, hold_seconds=60)
    ranked.add({("a",): 12_000, ("c",): 100}, now=0.0)
    ranked.add({("b",): 50, ("c",): 100}, now=61.0)  # a gained 0: b takes its slot
    assert exported(ranked) == {("c",): 200, ("b",): 50, OTHER: 12_000}
    ranked.add({("a",): 500, ("b",): 1, ("c",): 100}, now=62.0)  # a beats c, but is out of its slot for only 1 s
    assert exported(ranked) == {("c",): 300, ("b",): 51, OTHER: 12_500}
    ranked.add({("a",): 500, ("b",): 1, ("c",): 100}, now=121.0)  # out for 60 s: named anew
    assert exported(ranked) == {("c",): 400, ("a",): 500, OTHER: 12_552}  # b, the weakest held, gives way
