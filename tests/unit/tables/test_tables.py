"""The collectors' tables (agent/tables/) against what they declare: the BPF programs' structs and maps, every metric
of agent/metrics.py, and the modes the collectors run in. Each test is a step of docs/metrics.md's "Adding a metric"
that, forgotten, fails here: a struct field without its row, a row without its field, a metric without a row, a
bounded map the kernel memory does not count.
"""

from __future__ import annotations

import re

import pytest

from agent import metrics
from agent.collectors import modes
from agent.metrics import PROCESS_LABELS, WORKLOAD_LABELS, MetricSpec
from agent.tables import AGENT, DIAGNOSIS, TABLES, in_mode, kernel_memory
from agent.tables.rows import EVERY_MODE, U64, Counter, Histogram, Table
from tests.support.agent import REPO

SIZES = {"u64": 8, "u32": 4, "u16": 2, "u8": 1, "char": 1}
BPF_TABLES = [table for table in TABLES if table.program is not None and table.rows]


def source(program: str) -> str:
    return (REPO / "bpf" / program).read_text()


def constants(text: str) -> dict[str, int]:
    """#define NAME N and enum NAME = N of a program."""
    found = {name: int(number) for name, number in re.findall(r"#define (\w+) (\d+)\b", text)}
    return found | {name: int(number) for name, number in re.findall(r"\b([A-Z_]+) = (\d+)", text)}


def structs(text: str) -> dict[str, list[tuple[str, str, int]]]:
    """Each struct of a program: its fields as (type, name, slots)."""
    known = constants(text)
    found = {}
    for name, body in re.findall(r"struct (\w+) \{(.*?)\};", text, re.S):
        fields: list[tuple[str, str, int]] = []
        for kind, nested, field, count in re.findall(
            r"\b(?:(u64|u32|u16|u8|char)|struct (\w+)) (\w+)(?:\[(\w+)\])?;", body
        ):
            if nested:  # a struct inside a struct: its fields in place (all the programs' structs align to 8)
                fields += found[nested]
            else:
                fields.append((kind, field, known.get(count, int(count) if count.isdigit() else 0) if count else 1))
        found[name] = fields
    return found


def struct_bytes(fields: list[tuple[str, str, int]]) -> int:
    """The size of a struct of these fields (their natural alignment, the struct's rounded to its largest)."""
    offset, largest = 0, 1
    for kind, _name, count in fields:
        size = SIZES[kind]
        offset = -(-offset // size) * size + size * count
        largest = max(largest, size)
    return -(-offset // largest) * largest


def type_bytes(kind: str, known: dict[str, list[tuple[str, str, int]]]) -> int:
    return struct_bytes(known[kind.split()[1]]) if kind.startswith("struct ") else SIZES[kind]


def bounded_maps(text: str) -> dict[str, tuple[str, str, str, int]]:
    """Each hash map and array of a program sized by a MAX_* bound: name -> (key type, value type, bound, entries per
    unit)."""
    multiples = {
        name: (bound, int(times)) for name, times, bound in re.findall(r"#define (\w+) \((\d+) \* (MAX_\w+)\)", text)
    }
    found = {}
    declared = [
        (name, key, value, size)
        for name, key, value, size in re.findall(r"BPF_HASH\((\w+), (struct \w+|\w+), (struct \w+|\w+), (\w+)\)", text)
    ]
    declared += [
        (name, key, value, size)
        for key, value, name, size in re.findall(
            r'BPF_TABLE\("lru_hash", (struct \w+|\w+), (struct \w+|\w+), (\w+), (\w+)\)', text
        )
    ]
    declared += [
        (name, "u32", value, size)
        for name, value, size in re.findall(r"BPF_ARRAY\((\w+), (struct \w+|\w+), (\w+)\)", text)
    ]
    for name, key, value, size in declared:
        bound, times = multiples.get(size, (size, 1))
        if bound.startswith("MAX_"):
            found[name] = (key, value, bound, times)
    return found


@pytest.mark.parametrize("table", BPF_TABLES, ids=lambda table: table.collector)
def test_each_row_reads_a_counting_field_of_its_maps_struct(table: Table) -> None:
    assert table.program is not None
    text = source(table.program)
    known, maps = structs(text), bounded_maps(text)
    for layout, map_name in ((table.layout, table.map), (table.process_layout, table.process_map)):
        if not layout.fields:
            continue
        fields = {name: (kind, count) for kind, name, count in known[maps[map_name][1].split()[1]]}
        for name, width in layout.fields:
            assert name in fields, (
                f"{table.program}: `{map_name}`'s struct has no field {name} (a row of table {table.collector})"
            )
            assert fields[name] == ("u64", width), (
                f"{table.program}: {map_name}.{name} is {fields[name]}, the rows read {width} u64"
            )


@pytest.mark.parametrize("table", [table for table in TABLES if table.program is not None], ids=lambda t: t.collector)
def test_the_tables_bounded_maps_are_the_programs_with_their_sizes(table: Table) -> None:
    """A struct field without its row, or a bounded map the table does not list, would be kernel memory the --max-*
    messages do not count."""
    assert table.program is not None
    text = source(table.program)
    known, maps = structs(text), bounded_maps(text)
    # code attribution's maps: no --max-* flag sizes them (site_workloads: --code-workloads of 80 bytes, at most 1024)
    # (the per-CPU last_sites: one slot per possible CPU)
    sized_apart = {"MAX_CALL_SITES", "MAX_SAMPLE_SLOTS", "MAX_SITE_WORKLOADS", "MAX_CPUS"}
    assert {bounded.map for bounded in table.maps} == {
        name for name, (*_, bound, _times) in maps.items() if bound not in sized_apart
    }
    for bounded in table.maps:
        key, value, bound, times = maps[bounded.map]
        assert (bounded.bound, bounded.times) == (bound, times), bounded.map
        assert bounded.key_bytes == type_bytes(key, known), bounded.map
        assert table.value_bytes(bounded) == type_bytes(value, known), (
            f"{table.program}: {value} is {type_bytes(value, known)} bytes, table {table.collector} counts "
            f"{table.value_bytes(bounded)}: a field without its row (or other_bytes) in agent/tables/?"
        )


def test_the_kernel_memory_of_each_bound_is_its_maps_entries() -> None:
    # The numbers the --max-* messages give (docs/configuration.md), as the maps' memlock on Linux 6.18 adds up.
    assert kernel_memory.entry_bytes(8, 128) == 200  # syscalls `cgroups`: u64 -> struct cgroup_stats
    assert kernel_memory.bytes_per("MAX_TIMED") == 80  # families `timed_workloads`: u64 -> u8
    assert kernel_memory.maps_of("MAX_PROCESSES") == ["syscalls", "sched"]


def test_every_metric_is_a_row_of_a_table_or_the_agents_own() -> None:
    every = {value for value in vars(metrics).values() if isinstance(value, MetricSpec)}
    tabled = {spec for table in (*TABLES, DIAGNOSIS) for spec in table.specs}
    assert every == set(metrics.SPECS)
    missing = sorted(spec.name for spec in every - tabled - set(AGENT))
    assert not missing, f"metrics without a row in agent/tables/ (or a place in tables.AGENT): {missing}"
    assert not tabled & set(AGENT)


def test_a_rows_labels_are_the_workloads_and_its_decoders() -> None:
    for table in TABLES:
        for row in table.rows:
            split = () if isinstance(row, Histogram) or row.by is None else (row.by.label,)
            assert row.spec.labels == (*WORKLOAD_LABELS, *split), row.spec.name
            if row.process is not None:
                assert row.process.labels == (*PROCESS_LABELS, *split), row.process.name
            if isinstance(row, Counter) and row.only_nonzero:
                assert row.process is None, "a per-process series exports every slot"


def test_each_mode_runs_the_collectors_of_its_tables() -> None:
    for mode in EVERY_MODE:
        assert sorted(factory.name for factory in modes.factories(mode)) == sorted(t.collector for t in in_mode(mode))


def test_a_layout_reads_a_value_by_its_fields_offsets_whatever_their_order() -> None:
    table = next(table for table in TABLES if table.collector == "syscalls")
    layout = table.layout
    value = layout.value_type()()
    value.yields, value.futex_wait_ns = 7, 9
    value.futex_calls[:] = [1, 2, 3, 4, 5, 6]
    value.futex_wait_buckets[:] = [0] * 7 + [11]
    vector = layout.vector(value)
    assert len(vector) == layout.width == 16 and U64 * layout.width == 128
    assert vector[layout.slices["futex_calls"]] == (1, 2, 3, 4, 5, 6)
    assert (vector[layout.slices["yields"]], vector[layout.slices["futex_wait_ns"]]) == ((7,), (9,))


def documented() -> dict[str, tuple[str, str, str]]:
    """docs/metrics.md's table of metrics: each name it lists (labels as written) -> (type, collector, the row)."""
    text = (REPO / "docs" / "metrics.md").read_text()
    lines = text[text.index("| metric | type | collector |") :].splitlines()[2:]
    found = {}
    for line in lines:
        if not line.startswith("|"):
            break
        names, kind, collector = (cell.strip() for cell in line.strip("|").split("|")[:3])
        for name in re.findall(r"`([^`]+)`", names):
            found[name] = (kind, collector, line[:100])
    return found


def listed(spec: MetricSpec) -> str:
    """How docs/metrics.md lists *spec*: the name its series carry, and the labels beyond the workload's."""
    from agent.series.schema import parts_of

    labels = parts_of(spec)
    return metrics.shown(spec) + (f"{{{', '.join(labels)}}}" if labels else "")


def test_docs_metrics_table_lists_every_metric_of_the_tables_with_its_type_and_collector() -> None:
    docs = documented()
    expected: dict[str, tuple[str, set[str]]] = {}
    processes: set[str] = set()
    for table in (*TABLES, DIAGNOSIS):
        for spec in table.specs:
            if set(PROCESS_LABELS) <= set(spec.labels):
                processes.add(table.collector)
                continue
            kind = {"CounterSpec": "counter", "GaugeSpec": "gauge", "HistogramSpec": "histogram"}[type(spec).__name__]
            expected.setdefault(listed(spec), (kind, set()))[1].add(table.collector)
    missing = [
        f"`{name}` | {kind} | {' or '.join(sorted(by))}" for name, (kind, by) in expected.items() if name not in docs
    ]
    assert not missing, "add to docs/metrics.md's table:\n" + "\n".join(missing)
    for name, (kind, by) in expected.items():
        documented_kind, collector, row = docs[name]
        assert documented_kind == kind, row
        assert re.split(r"[ ,]", collector)[0] in by, f"{row}: exported by {sorted(by)}"
    process_row = docs.pop("schedwatch_process_*")
    assert set(re.split(r", ", process_row[1])) == processes, process_row
    stale = sorted(set(docs) - set(expected))
    assert not stale, f"docs/metrics.md's table lists metrics no table exports: {stale}"
