"""The loader child and the fds it hands over: real programs in the real kernel, exact counts, no bcc in the reader."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.bpf import BpfUnavailable, handover, syscall
from agent.bpf.maps import BATCH_ENTRIES, MAP_TYPE_ARRAY, MAP_TYPE_HASH, BpfMap, MapSpec
from agent.bpf.probes.base import DecodedEntries, ProbeLimits, common_defines
from agent.bpf.probes.sched import MISSED_EVENTS, read_workload_parts
from agent.bpf.probes.sched import compile_defines as sched_defines
from agent.bpf.ringbuf import RingBuffer
from agent.bpf.stats import program_stats
from agent.machine import kernel
from tests.support.agent import REPO, require_root
from tests.support.workloads import CgroupSandbox, Workload

MAP_CREATE = 0
VALUE_DESC = '["value", [["count","unsigned long long"], ["pair","unsigned long long", [2]]], "struct"]'


def sched_totals(program: handover.LoadedProgram, key: int) -> ctypes.Structure:
    """Workload *key*'s struct cgroup_sched, read as the agent reads it (its workload slot's and its `cgroups`
    entry's added; KeyError if it has neither)."""
    hashed = program.maps["cgroups"]
    totals, _held = read_workload_parts(hashed, program.maps["workload_slots"], forgotten=set())
    return hashed.Leaf.from_buffer_copy(totals[key])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def syscalls_program(headers: None) -> Iterator[handover.LoadedProgram]:
    program = handover.load("syscalls.bpf.c", common_defines(ProbeLimits(max_processes=64), kernel.tracefs_root()))
    yield program
    program.close()


def test_programs_stay_attached_after_the_loader_exits(
    syscalls_program: handover.LoadedProgram, cgroups: CgroupSandbox, yielder: Path
) -> None:
    assert not Path(f"/proc/{syscalls_program.loader_pid}").exists(), "the loader child is still there"
    targets = {os.readlink(f"/proc/self/fd/{fd}") for fd in syscalls_program.attachments}
    assert targets <= {"anon_inode:[perf_event]", "anon_inode:bpf-link"}
    assert len(syscalls_program.attachments) == len(syscalls_program.programs)
    group = cgroups.make("handover")
    table = syscalls_program.maps["cgroups"]
    Workload(yielder, group, 12_345, 1, hold=False)
    assert table.get(group.stat().st_ino).yields == 12_345
    Workload(yielder, group, 1_000, 3, hold=False)  # later runs keep arriving
    assert table.get(group.stat().st_ino).yields == 15_345
    assert {stats.program for stats in program_stats(syscalls_program.programs)} >= {
        "sys_enter_sched_yield",
        "sys_enter_futex",
        "sys_exit_futex",
        "sched_process_exit",
    }


def test_closing_the_fds_detaches_the_programs(headers: None, cgroups: CgroupSandbox, yielder: Path) -> None:
    program = handover.load("syscalls.bpf.c", common_defines(ProbeLimits(), kernel.tracefs_root()))
    kept = BpfMap(os.dup(program.maps["cgroups"].fd), program.maps["cgroups"].spec)
    try:
        before, after = cgroups.make("attached"), cgroups.make("detached")
        Workload(yielder, before, 10, 1, hold=False)
        program.close()
        Workload(yielder, after, 10, 1, hold=False)
        counted = dict(kept.items())
        assert counted[before.stat().st_ino].yields == 10
        assert after.stat().st_ino not in counted
    finally:
        kept.close()


@pytest.mark.parametrize("moves_counted", [True, False], ids=["key cached until a move", "key read every switch"])
def test_a_thread_that_joins_a_cgroup_has_its_sleeps_counted_there(
    headers: None, cgroups: CgroupSandbox, sleeper: Path, moves_counted: bool
) -> None:
    # The sleeper joins its cgroup itself (a move) and then sleeps: both builds of the sched program, with and
    # without the cgroup_attach_task count (kernels that lack it), must read its new cgroup after the move.
    defines = sched_defines(ProbeLimits(), kernel.tracefs_root())
    assert "HAVE_CGROUP_ATTACH" in defines, "this kernel has cgroup:cgroup_attach_task; the agent must find it"
    if not moves_counted:
        del defines["HAVE_CGROUP_ATTACH"]
    program = handover.load("sched.bpf.c", defines)
    try:
        group = cgroups.make("joins")
        count, sleep_ns = 20, 10_000_000
        workload = Workload(sleeper, group, count, sleep_ns)
        try:
            entry = sched_totals(program, group.stat().st_ino)
        finally:
            workload.release()
        # A switch the kernel did not deliver loses one off-CPU period, and is counted. (On this VM the sandbox's init
        # process raises no tracepoint events: a thread that takes a CPU from it is not seen arriving, in about 1 run
        # of 30.)
        missed = entry.missed[MISSED_EVENTS.index("switch_in")]
        assert missed <= 2, f"the kernel did not deliver {missed} of 20 switches: too many to judge"
        blocked_ns = entry.offcpu_ns[1]
        assert (count - missed) * sleep_ns * 0.99 <= blocked_ns <= workload.truth["slept_ns"] + 2_000_000
    finally:
        program.close()


def test_threads_whose_slot_another_holds_are_counted_exactly_from_the_hash_map(
    headers: None, cgroups: CgroupSandbox, sleeper: Path
) -> None:
    # Every slot of thread_slots is held by a thread id no task has (ids are below 2**32), so every thread keeps its
    # state in the threads hash map instead, as a thread whose slot another thread holds does: its sleeps must count
    # as exactly there.
    program = handover.load("sched.bpf.c", sched_defines(ProbeLimits(), kernel.tracefs_root()))
    try:
        slots = program.maps["thread_slots"]
        stranger = slots.Leaf()
        stranger.tid = 1 << 40
        for index in range(slots.max_entries):
            slots.set(index, stranger)
        group = cgroups.make("slot-held")
        count, sleep_ns = 20, 10_000_000
        workload = Workload(sleeper, group, count, sleep_ns)
        try:
            entry = sched_totals(program, group.stat().st_ino)
            in_hash = {key for key, _state in program.maps["threads"].items()}
        finally:
            workload.release()
        assert {slot.tid for _index, slot in slots.items()} == {1 << 40}, "a thread took a slot that was held"
        assert workload.pid in in_hash, "the sleeper's thread (its only one) has no entry in the threads hash map"
        missed = entry.missed[MISSED_EVENTS.index("switch_in")]
        assert missed <= 2, f"the kernel did not deliver {missed} of 20 switches: too many to judge"
        assert (count - missed) * sleep_ns * 0.99 <= entry.offcpu_ns[1] <= workload.truth["slept_ns"] + 2_000_000
    finally:
        program.close()


def test_a_workload_whose_slot_another_holds_is_counted_in_the_hash_map_until_the_holder_is_forgotten(
    headers: None, cgroups: CgroupSandbox, sleeper: Path
) -> None:
    # Every slot of workload_slots is held by a key no cgroup has, with totals of its own: a workload's sleeps must
    # count exactly in the `cgroups` hash map instead. Once the agent forgets a slot's holder (forgotten_keys), the
    # next workload that maps to the slot takes it over, from zero, and counts exactly there.
    program = handover.load("sched.bpf.c", sched_defines(ProbeLimits(), kernel.tracefs_root()))
    stranger_key = 1 << 62
    try:
        slots, hashed = program.maps["workload_slots"], program.maps["cgroups"]
        stranger = slots.Leaf()
        stranger.key = stranger_key
        stranger.totals.offcpu_ns[1] = 10**15  # what a workload that takes the slot over must not inherit
        for index in range(slots.max_entries):
            slots.set(index, stranger)
        count, sleep_ns = 20, 10_000_000
        for phase in ("held", "taken over"):
            group = cgroups.make(f"workload-slot-{phase.replace(' ', '-')}")
            key = group.stat().st_ino
            if phase == "taken over":  # its slot's holder, alone of all the holders, is forgotten
                forgotten = slots.Leaf.from_buffer_copy(bytes(stranger))
                forgotten.key = stranger_key + 1
                slots.set(key % slots.max_entries, forgotten)
                program.maps["forgotten_keys"].set(forgotten.key, 1)
            workload = Workload(sleeper, group, count, sleep_ns)
            try:
                in_hash = dict(hashed.items())
                slot = slots.get(key % slots.max_entries)
                entry = sched_totals(program, key)
            finally:
                workload.release()
            if phase == "held":
                assert key in in_hash, "a workload whose slot another holds has no entry in the cgroups hash map"
                assert slot is not None and slot.key == stranger_key, "a workload took a slot that was held"
            else:
                assert slot is not None and slot.key == key, "a workload did not take over a forgotten one's slot"
                assert key not in in_hash, "a workload with a slot of its own also has a cgroups entry"
                assert stranger_key + 1 not in dict(program.maps["forgotten_keys"].items())
            missed = entry.missed[MISSED_EVENTS.index("switch_in")]
            assert missed <= 2, f"the kernel did not deliver {missed} of 20 switches: too many to judge"
            blocked_ns = entry.offcpu_ns[1]
            assert (count - missed) * sleep_ns * 0.99 <= blocked_ns <= workload.truth["slept_ns"] + 2_000_000, phase
    finally:
        program.close()


def test_the_agent_side_never_imports_bcc(headers: None) -> None:
    code = (
        "import sys; from agent.bpf import handover; "
        "p = handover.load('sched.bpf.c', {'MAX_CGROUPS': 64, 'MAX_PROCESSES': 0, 'MAX_THREADS': 64, "
        "'STATE_MASK': '0xff', 'DEAD_MASK': '0x30'}); "
        "print(sorted(p.maps), 'bcc' in sys.modules); p.close()"
    )
    shown = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    # No processes map: MAX_PROCESSES 0.
    assert shown.stdout.strip() == (
        "['cgroups', 'drops', 'forgotten_keys', 'neighbours', 'thread_slots', 'threads', 'workload_slots'] False"
    )


def test_compile_error_reaches_the_user_in_one_line(
    headers: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "broken.bpf.c"
    source.write_text("int broken( {\n")
    with pytest.raises(BpfUnavailable) as raised:
        handover.load(str(source), {})
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"cannot load {source}: Failed to compile BPF module")
    assert "the compiler's or verifier's output is above" in message
    assert "BCC_KERNEL_SOURCE" in message
    assert "main.c:1:13: error: expected parameter declarator" in capfd.readouterr().err  # clang's, passed through


def test_verifier_rejection_reaches_the_user_in_one_line(
    headers: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "rejected.bpf.c"
    source.write_text(
        "BPF_HASH(counts, int, u64, 1);\n"
        "TRACEPOINT_PROBE(syscalls, sys_enter_sched_yield) {\n"
        "    int zero = 0;\n"
        "    u64 *count = counts.lookup(&zero);\n"
        "    *count += 1;  /* no NULL check: the verifier refuses */\n"
        "    return 0;\n"
        "}\n"
    )
    with pytest.raises(BpfUnavailable) as raised:
        handover.load(str(source), {})
    message = str(raised.value)
    assert "\n" not in message
    # the program and the verifier's reason, with the instruction it refused (agent/bpf/verifier.py)
    assert "verifier refused tracepoint__syscalls__sys_enter_sched_yield: " in message, message
    assert "R0 invalid mem access 'map_value_or_null' (at instruction " in message, message
    assert "map_value_or_null" in capfd.readouterr().err  # the verifier's log, passed through


class _CreateAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in ("map_type", "key_size", "value_size", "max_entries")]


class _Value(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("pair", ctypes.c_uint64 * 2)]


def _real_map(map_type: int, max_entries: int, entries: dict[int, tuple[int, int, int]]) -> BpfMap:
    """A map made with BPF_MAP_CREATE and filled with BPF_MAP_UPDATE_ELEM (u64 keys, _Value values)."""
    key_size = 4 if map_type == MAP_TYPE_ARRAY else 8
    attr = _CreateAttr(map_type, key_size, ctypes.sizeof(_Value), max_entries)
    fd = syscall.bpf(MAP_CREATE, attr)
    key_desc = '"unsigned int"' if map_type == MAP_TYPE_ARRAY else '"unsigned long long"'
    table = BpfMap(fd, MapSpec("test", map_type, key_size, ctypes.sizeof(_Value), max_entries, key_desc, VALUE_DESC))
    for key, (count, first, second) in entries.items():
        _set(table, key, count, first, second)
    return table


def _plain(items: list[tuple[int, _Value]]) -> dict[int, tuple[int, int, int]]:
    found = {key: (value.count, value.pair[0], value.pair[1]) for key, value in items}
    assert len(found) == len(items), "a key was read twice"
    return found


def _from_bytes(items: list[tuple[bytes, bytes]]) -> dict[int, tuple[int, int, int]]:
    found = {
        int.from_bytes(key, sys.byteorder): tuple(int.from_bytes(value[i : i + 8], sys.byteorder) for i in (0, 8, 16))
        for key, value in items
    }
    assert len(found) == len(items), "a key was read twice"
    return found  # type: ignore[return-value]


def test_batch_lookup_equals_per_key_lookup_on_a_real_hash_map() -> None:
    require_root()
    entries = {key * 7919 + 3: (key, key * 2, 2**64 - 1 - key) for key in range(3 * BATCH_ENTRIES + 17)}
    table = _real_map(MAP_TYPE_HASH, 4096, entries)
    try:
        assert _plain(table.items()) == entries
        assert _plain(table.items_by_key()) == entries
        assert _from_bytes(table.raw_items()) == entries  # the bytes as written, in batches
        gone = list(entries)[::3]
        assert table.delete([*gone, 1]) == len(gone)  # key 1 was never there
        for key in gone:
            del entries[key]
        assert _plain(table.items()) == entries == _plain(table.items_by_key())
        assert table.count() == len(entries)
        assert table.get(gone[0]) is None
        assert table.get(next(iter(entries))).count == entries[next(iter(entries))][0]
    finally:
        table.close()


def _set(table: BpfMap, key: int, count: int, first: int, second: int) -> None:
    """Write one entry as raw bytes, apart from BpfMap's own encoding (which the readers under test share)."""
    key_bytes = key.to_bytes(table.spec.key_size, sys.byteorder)
    value_bytes = b"".join(number.to_bytes(8, sys.byteorder) for number in (count, first, second))
    syscall.update(table.fd, ctypes.create_string_buffer(key_bytes), ctypes.create_string_buffer(value_bytes))


def test_decoded_entries_are_decoded_again_only_when_their_bytes_changed() -> None:
    require_root()
    entries = {key: (key, key + 1, key + 2) for key in range(1, 301)}
    table = _real_map(MAP_TYPE_HASH, 1024, entries)
    decodings: list[int] = []

    def decode(value: _Value) -> tuple[int, int, int]:
        decodings.append(value.count)
        return (value.count, value.pair[0], value.pair[1])

    reader = DecodedEntries(decode)
    try:
        first = reader.read(table)
        assert first == entries and len(decodings) == 300
        _set(table, 7, 70, 8, 9)  # one counter moved
        _set(table, 8, 8, 9, 10)  # written again with the same bytes
        table.delete([9])
        decodings.clear()
        second = reader.read(table)
        assert decodings == [70], "only the entry whose bytes changed was decoded again"
        assert second[7] == (70, 8, 9) and 9 not in second and len(second) == 299
        assert all(second[key] is first[key] for key in second if key != 7), "the others are the same objects"
        _set(table, 9, 9, 10, 11)  # a key back after it was gone: decoded afresh
        assert reader.read(table)[9] == (9, 10, 11) and decodings == [70, 9]
        _set(table, 7, 71, 8, 9)
        assert reader.read_keys(table, [7, 400]) == {7: (71, 8, 9)}, "read now; a key not there is left out"
    finally:
        table.close()


def test_batch_lookup_of_an_empty_map_and_of_an_array() -> None:
    require_root()
    empty = _real_map(MAP_TYPE_HASH, 16, {})
    array = _real_map(MAP_TYPE_ARRAY, 4, {1: (5, 6, 7)})
    try:
        assert empty.items() == [] == empty.items_by_key()
        expected = {0: (0, 0, 0), 1: (5, 6, 7), 2: (0, 0, 0), 3: (0, 0, 0)}
        assert _plain(array.items()) == expected == _plain(array.items_by_key())
    finally:
        empty.close()
        array.close()


RING_SOURCE = """
struct record { u32 tgid; u32 seq; u64 payload; };
BPF_RINGBUF_OUTPUT(records, 1);
BPF_ARRAY(sequence, u32, 1);
TRACEPOINT_PROBE(syscalls, sys_enter_sched_yield) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    int zero = 0;
    if (tgid != TARGET)
        return 0;
    u32 *next = sequence.lookup(&zero);
    if (!next)
        return 0;
    struct record record = {.tgid = tgid, .seq = *next, .payload = PAYLOAD};
    *next = record.seq + 1;  /* one yielding thread: no atomics needed */
    records.ringbuf_output(&record, sizeof(record), 0);
    return 0;
}
"""


class _Record(ctypes.Structure):
    _fields_ = [("tgid", ctypes.c_uint32), ("seq", ctypes.c_uint32), ("payload", ctypes.c_uint64)]


def test_ring_buffer_consumer_hands_over_every_record_in_order_across_wraps(headers: None, tmp_path: Path) -> None:
    source = tmp_path / "ring.bpf.c"
    source.write_text(RING_SOURCE)
    program = handover.load(str(source), {"TARGET": os.getpid(), "PAYLOAD": "0x1122334455667788ULL"})
    received: list[_Record] = []
    ring_map = program.maps["records"]
    assert ring_map.max_entries == 4096  # one page: 24-byte records wrap it every 170
    ring = RingBuffer(ring_map.fd, ring_map.max_entries, lambda data: received.append(_Record.from_buffer_copy(data)))
    try:
        assert ring.consume() == 0
        for _ in range(20):
            for _ in range(100):
                os.sched_yield()
            assert ring.poll(1000) == 100
        assert [record.seq for record in received] == list(range(2000))
        assert {(record.tgid, record.payload) for record in received} == {(os.getpid(), 0x1122334455667788)}
        assert ring.poll(10) == 0
    finally:
        ring.close()
        program.close()
