"""How the agent reads a workload's totals from bpf/sched.bpf.c's two places (its workload slot, its `cgroups`
entry): the raw structs added field by field, and a slot being taken over read as no workload's."""

from __future__ import annotations

import struct

from agent.bpf.probes.sched import CLAIMING_KEY, add_words, merge_workload_parts, slot_totals


def words(*values: int) -> bytes:
    return struct.pack(f"={len(values)}Q", *values)


def test_a_workloads_two_parts_are_added_field_by_field() -> None:
    assert add_words(words(1, 2, 3), words(10, 20, 30)) == words(11, 22, 33)
    assert add_words(words(5, 0)) == words(5, 0)


def test_a_sum_past_64_bits_wraps_as_the_kernels_counters_do() -> None:
    assert add_words(words(2**64 - 1), words(2)) == words(1)


def test_a_slot_gives_its_key_and_totals_and_a_slot_being_taken_over_no_key() -> None:
    assert slot_totals(words(4242, 7, 8)) == (4242, words(7, 8))
    assert slot_totals(words(CLAIMING_KEY, 7, 8))[0] == 0
    assert slot_totals(words(0, 0, 0))[0] == 0


def test_a_forgotten_workload_still_in_its_slot_is_left_out_until_its_slot_is_taken() -> None:
    hashed = {1: words(1, 1), 9: words(4, 4)}
    slots = [words(1, 2, 2), words(7, 5, 5), words(CLAIMING_KEY, 0, 0), words(0, 0, 0)]
    totals, still_held = merge_workload_parts(hashed, slots, forgotten={7, 8})
    # 7 was forgotten and still holds its slot: read no more, so its series expire; 8's slot was taken over.
    assert totals == {1: words(3, 3), 9: words(4, 4)}
    assert still_held == {7}
    totals, still_held = merge_workload_parts({}, [words(11, 1, 1)], forgotten=still_held)
    assert totals == {11: words(1, 1)} and still_held == set()
