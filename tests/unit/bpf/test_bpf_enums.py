"""The names the agent gives the BPF programs' slots, checked against the C: each enum the Python side mirrors (its
members in the order of their values, named by the member less its prefix), each histogram's bounds and bucket
count, and each program's drop slots (enum drop_reason, each naming a map the program declares).

The programs are read as the agent compiles them (agent/bpf/compile.py: bpf/schedwatch.h spliced in).
"""

from __future__ import annotations

import re

import pytest

from agent.bpf.compile import program_text
from agent.bpf.probes.base import BpfProbe
from agent.bpf.probes.families import FamiliesProbe
from agent.bpf.probes.oncpu import DROP_SITE_SLOT, OnCpuProbe
from agent.bpf.probes.sched import HOLDERS, MISSED_EVENTS, OFFCPU_REASONS, RUNQ_BUCKET_BOUNDS, SLEEPS, SchedProbe
from agent.bpf.probes.syscalls import FUTEX_OPS, SITE_KINDS, WAIT_BUCKET_BOUNDS, SyscallProbe
from agent.diagnosis.inputs.live import budget_inputs
from agent.machine.syscall_families import FAMILIES
from agent.top import table
from tests.unit.bpf.test_bpf_sources import REPO

BPF = REPO / "bpf"
# (program, enum, member prefix, the member counting the others, the Python names in the order of the values)
ENUMS = [
    ("sched.bpf.c", "offcpu_reason", "", "REASONS", OFFCPU_REASONS),
    ("sched.bpf.c", "missed_event", "MISSED_", "MISSED_EVENTS", MISSED_EVENTS),
    ("sched.bpf.c", "holder", "HOLDER_", "HOLDERS", HOLDERS),
    ("sched.bpf.c", "sleep", "SLEEP_", "SLEEPS", SLEEPS),
    ("syscalls.bpf.c", "futex_class", "FC_", "FC_COUNT", FUTEX_OPS),
    ("syscalls.bpf.c", "site_kind", "SITE_", None, SITE_KINDS),
    ("families.bpf.c", "family", "F_", "FAMILIES", FAMILIES),
]
# (program, function, buckets' count define, the bounds in seconds)
HISTOGRAMS = [
    ("sched.bpf.c", "runq_bucket", "RUNQ_BUCKETS", RUNQ_BUCKET_BOUNDS),
    ("syscalls.bpf.c", "wait_bucket", "WAIT_BUCKETS", WAIT_BUCKET_BOUNDS),
]
PROBES: list[type[BpfProbe]] = [SchedProbe, SyscallProbe, FamiliesProbe]
# The generic drop slots, by enum drop_reason member; the others name a map of each program's own.
GENERIC_DROP_SLOTS = {
    "DROP_CGROUP_MAP": "cgroups",
    "DROP_PROCESS_MAP": "processes",
    "DROP_ANNOUNCEMENT": "new_processes",
}
NO_MAP = "unused"  # a slot the program does not use
DECLARED_MAP = re.compile(
    r"\bBPF_(?:HASH|ARRAY|RINGBUF_OUTPUT|PERCPU_ARRAY)\((\w+)|BPF_TABLE\(\"\w+\",[^,]+,[^,]+, (\w+)"
)


def code(program: str) -> str:
    """The program as compiled, comments removed."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", program_text(BPF, program), flags=re.DOTALL)


def enum_members(text: str, name: str) -> list[tuple[str, int]]:
    """The members of `enum NAME { ... }` with their values (each given explicitly)."""
    found = re.search(rf"\benum {name} \{{(.*?)\}};", text, re.DOTALL)
    assert found is not None, f"no enum {name}"
    members = [(member, int(value)) for member, value in re.findall(r"(\w+) = (\d+)", found.group(1))]
    assert members, f"enum {name} gives its members no values"
    return members


@pytest.mark.parametrize(("program", "enum", "prefix", "count", "names"), ENUMS, ids=[e[1] for e in ENUMS])
def test_each_mirrored_enum_names_the_c_members_in_the_order_of_their_values(
    program: str, enum: str, prefix: str, count: str | None, names: tuple[str, ...]
) -> None:
    members = dict(enum_members(code(program), enum))
    total = members.pop(count) if count is not None else len(members)
    named = sorted((value, member) for member, value in members.items() if value < total)
    assert [value for value, _member in named] == list(range(total)), f"enum {enum}: values are not 0..{total - 1}"
    assert tuple(member.removeprefix(prefix).lower() for _value, member in named) == names


def test_an_enum_out_of_step_with_its_names_is_caught() -> None:
    members = dict(enum_members(code("sched.bpf.c"), "holder"))
    total = members.pop("HOLDERS")
    named = [member.removeprefix("HOLDER_").lower() for member, value in sorted(members.items(), key=lambda m: m[1])]
    assert len(named) == total and tuple(named) != ("other", "self", "kernel")


def test_the_copies_outside_the_probes_are_the_probes_names() -> None:
    assert table.HOLDERS == budget_inputs.HOLDERS == HOLDERS
    assert budget_inputs.BLOCKED_STATES == SLEEPS


@pytest.mark.parametrize(("program", "function", "count", "bounds"), HISTOGRAMS, ids=[h[1] for h in HISTOGRAMS])
def test_each_histograms_bounds_and_bucket_count_are_the_programs(
    program: str, function: str, count: str, bounds: tuple[float, ...]
) -> None:
    text = code(program)
    body = re.search(rf"\b{function}\(u64 ns\)\s*\{{(.*?)\n\}}", text, re.DOTALL)
    assert body is not None, f"no function {function} in {program}"
    limits = [int(ns) for ns in re.findall(r"ns <= (\d+)ULL", body.group(1))]
    assert limits == [round(bound * 1e9) for bound in bounds]
    defined = re.search(rf"#define {count} (\d+)", text)
    assert defined is not None and int(defined.group(1)) == len(bounds) + 1  # and +Inf


@pytest.mark.parametrize("probe", PROBES, ids=lambda probe: probe.source)
def test_each_drop_slot_names_a_map_the_program_declares(probe: type[BpfProbe]) -> None:
    text = code(probe.source)
    slots = enum_members(text, "drop_reason")
    total = dict(slots)["DROP_REASONS"]
    assert len(probe.drop_maps) == total
    for member, value in slots:
        if member in GENERIC_DROP_SLOTS:
            assert probe.drop_maps[value] in (GENERIC_DROP_SLOTS[member], NO_MAP), member
    declared = {first or second for first, second in DECLARED_MAP.findall(text)}
    named = {name for name in probe.drop_maps if name != NO_MAP}
    assert named <= declared, f"{probe.source}: no map {sorted(named - declared)}"


def test_the_sampling_programs_drop_slot_is_the_headers() -> None:
    assert dict(enum_members(code(OnCpuProbe.source), "drop_reason"))["DROP_SITE_MAP"] == DROP_SITE_SLOT
