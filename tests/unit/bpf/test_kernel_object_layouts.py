"""ctypes types from bcc's JSON map descriptions, as bcc's own _decode_table_type builds them."""

from __future__ import annotations

import ctypes

import pytest

from agent.bpf.layouts import LayoutError, ctype_from_json

# What libbcc 0.26 says about the value of syscalls.bpf.c's cgroups map.
CGROUP_STATS = (
    '["cgroup_stats", [["yields","unsigned long long"], ["futex_calls","unsigned long long", [6]], '
    '["futex_wait_ns","unsigned long long"], ["futex_wait_buckets","unsigned long long", [8]] ], "struct_packed"]'
)


def test_scalars() -> None:
    assert ctype_from_json('"unsigned long long"') is ctypes.c_ulonglong
    assert ctype_from_json('"int"') is ctypes.c_int
    assert ctypes.sizeof(ctype_from_json('"unsigned __int128"')) == 16


def test_a_packed_struct_with_arrays() -> None:
    kind = ctype_from_json(CGROUP_STATS)
    assert ctypes.sizeof(kind) == 8 * (1 + 6 + 1 + 8)
    value = kind.from_buffer_copy(bytes(range(128)))
    assert value.yields == int.from_bytes(bytes(range(8)), "little")
    assert list(value.futex_calls)[5] == int.from_bytes(bytes(range(48, 56)), "little")
    assert kind.__name__ == "cgroup_stats"


def test_packing_alignment_unions_bit_fields_and_anonymous_members() -> None:
    packed = ctype_from_json('["p", [["a","unsigned char"], ["b","unsigned int"]], "struct_packed"]')
    aligned = ctype_from_json('["s", [["a","unsigned char"], ["b","unsigned int"]], "struct"]')
    union = ctype_from_json('["u", [["a","unsigned char"], ["b","unsigned long long"]], "union"]')
    bits = ctype_from_json('["f", [["low","unsigned int", 3], ["high","unsigned int", 29]], "struct"]')
    nested = ctype_from_json('["n", [["x","int"], ["", [["y","int"], ["z","int"]], "union"]], "struct"]')
    assert (ctypes.sizeof(packed), ctypes.sizeof(aligned), ctypes.sizeof(union), ctypes.sizeof(bits)) == (5, 8, 8, 4)
    value = bits.from_buffer_copy((6 << 3 | 0b101).to_bytes(4, "little"))
    assert (value.low, value.high) == (0b101, 6)
    member = nested(1)
    member.y = 7
    assert (ctypes.sizeof(nested), member.z) == (8, 7)  # the anonymous union's members read as the struct's own


@pytest.mark.parametrize("text", ['"unsigned wibble"', "[]", '["s", "not fields"]', '["s", [["a"]]]'])
def test_descriptions_bcc_would_not_produce_are_refused(text: str) -> None:
    with pytest.raises(LayoutError):
        ctype_from_json(text)
