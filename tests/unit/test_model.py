"""CounterTable: per-workload totals that never go backwards."""

from __future__ import annotations

import pytest

from agent.model import CounterTable


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rows(table: CounterTable) -> dict[tuple[str, ...], list[int]]:
    return {labels: list(totals) for labels, totals in table.rows()}


def test_sources_with_the_same_labels_are_summed() -> None:
    table = CounterTable(width=2, grace_seconds=10)
    table.update({1: (("a",), [1, 2]), 2: (("a",), [10, 20]), 3: (("b",), [5, 5])})
    assert rows(table) == {("a",): [11, 22], ("b",): [5, 5]}


def test_a_source_that_goes_away_is_folded_not_lost() -> None:
    table = CounterTable(width=1, grace_seconds=10)
    table.update({1: (("a",), [7]), 2: (("a",), [3])})
    table.update({2: (("a",), [4])})  # source 1 removed from the kernel map
    assert rows(table) == {("a",): [11]}
    table.update({2: (("a",), [4]), 3: (("a",), [1])})  # a new source for the same workload
    assert rows(table) == {("a",): [12]}


def test_relabelled_source_takes_its_label_sets_history_along() -> None:
    # A container first exported by id only, then by name once the runtime answered.
    table = CounterTable(width=1, grace_seconds=10)
    table.update({1: (("id",), [5]), 2: (("id",), [1])})
    table.update({2: (("id",), [2])})  # source 1 went away: folded into ("id",)
    table.update({2: (("id", "name"), [3])})
    assert rows(table) == {("id", "name"): [8]}
    assert table.labels_of(2) == ("id", "name")
    assert table.labels_of(1) is None


def test_a_recreated_kernel_entry_does_not_make_the_counter_go_backwards() -> None:
    table = CounterTable(width=2, grace_seconds=10)
    table.update({1: (("a",), [100, 50])})
    table.update({1: (("a",), [3, 1])})  # the entry was deleted and started again from zero
    assert rows(table) == {("a",): [103, 51]}


def test_label_sets_without_live_sources_expire_after_the_grace_period() -> None:
    clock = FakeClock()
    table = CounterTable(width=1, grace_seconds=5, keep_forever=frozenset({("removed",)}), clock=clock)
    table.update({1: (("a",), [1]), 2: (("removed",), [2])})
    clock.now = 3
    table.update({})
    assert rows(table) == {("a",): [1], ("removed",): [2]}
    clock.now = 5.5  # 5.5 s since the sources were last seen
    table.update({})
    assert rows(table) == {("removed",): [2]}
    assert len(table) == 1


def test_a_live_label_set_never_expires() -> None:
    clock = FakeClock()
    table = CounterTable(width=1, grace_seconds=1, clock=clock)
    for second in range(10):
        clock.now = second
        table.update({1: (("a",), [second])})
    assert rows(table) == {("a",): [9]}


def test_wrong_width_is_rejected() -> None:
    table = CounterTable(width=2, grace_seconds=1)
    with pytest.raises(ValueError, match="expected 2 values, got 1"):
        table.update({1: (("a",), [1])})


def test_totals_are_the_same_object_while_they_stand_and_made_again_after_every_kind_of_change() -> None:
    clock = FakeClock()
    table = CounterTable(width=1, grace_seconds=5, clock=clock)
    table.update({1: (("a",), [1]), 2: (("b",), [2]), 3: (("b",), [3])})
    first = dict(table.rows())
    table.update({1: (("a",), [1]), 2: (("b",), [2]), 3: (("b",), [3])})
    again = dict(table.rows())
    assert again[("a",)] is first[("a",)] and again[("b",)] is first[("b",)], "nothing changed: nothing made"
    steps = [
        ({1: (("a",), [4]), 2: (("b",), [2]), 3: (("b",), [3])}, {("a",): [4], ("b",): [5]}),  # a new value
        ({1: (("a",), [4]), 2: (("b",), [2])}, {("a",): [4], ("b",): [5]}),  # source 3 folded into b
        ({1: (("a",), [4]), 2: (("b",), [1])}, {("a",): [4], ("b",): [6]}),  # recreated entry: 5 kept, +1
        ({1: (("a",), [4]), 2: (("c",), [1])}, {("a",): [4], ("c",): [6]}),  # b relabelled c, history along
        ({2: (("c",), [1])}, {("a",): [4], ("c",): [6]}),  # a retired, kept for its grace period
    ]
    for live, expected in steps:
        table.update(live)
        assert rows(table) == expected
    clock.now = 10
    table.update({2: (("c",), [1])})
    assert rows(table) == {("c",): [6]}, "a expired"
    table.update({2: (("c",), [1]), 4: (("a",), [2])})
    assert rows(table) == {("c",): [6], ("a",): [2]}, "a starts afresh, not from its expired totals"
