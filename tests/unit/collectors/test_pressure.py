"""PSI: pressure files read as this machine's kernel writes them, and the pressure collector over a cgroup2 tree laid
out by the test (outermost cgroups only, never-stalled cgroups left out, nothing at all without PSI)."""

from __future__ import annotations

from pathlib import Path

from agent.collectors import CollectorContext
from agent.collectors.pressure import PressureCollector, check
from agent.config import Settings
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts
from agent.machine.pressure import Pressure, node_pressure_available, parse_pressure
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "pressure"


def psi(some_us: int, full_us: int | None) -> str:
    text = f"some avg10=0.00 avg60=0.00 avg300=0.00 total={some_us}\n"
    if full_us is not None:
        text += f"full avg10=0.00 avg60=0.00 avg300=0.00 total={full_us}\n"
    return text


def test_this_kernels_pressure_files_parse() -> None:
    for name in ("proc-pressure-cpu.txt", "proc-pressure-memory.txt", "proc-pressure-io.txt", "cgroup-cpu.pressure"):
        text = (FIXTURES / name).read_text()
        parsed = parse_pressure(text)
        assert parsed is not None, name
        totals = [int(field.split("=")[1]) for field in text.split() if field.startswith("total=")]
        assert [parsed.some_us, parsed.full_us] == totals, name


def test_a_file_without_a_some_total_is_not_pressure() -> None:
    assert parse_pressure("") is None
    assert parse_pressure("usage_usec 10\n") is None
    assert parse_pressure(psi(7, None)) == Pressure(7, None)  # the node's cpu before Linux 5.13


def tree(root: Path) -> Path:
    """/work and /work/inner (stalled) and /idle (never stalled)."""
    root.mkdir()
    (root / "cgroup.procs").write_text("")
    for path, some, full in (("work", 2_500_000, 1_000_000), ("work/inner", 900_000, 0), ("idle", 0, 0)):
        directory = root / path
        directory.mkdir()
        (directory / "cpu.pressure").write_text(psi(some, full))
        (directory / "memory.pressure").write_text(psi(some // 10, full // 10))
        (directory / "io.pressure").write_text(psi(0, 0))
    return root


def collector(root: Path, node: Path) -> PressureCollector:
    facts = MachineFacts("6.18", True, {}, False, None, None, "", CgroupLayout(unified=root, v1={}), root, None)
    context = CollectorContext(Settings(), facts, CgroupPathResolver(root), None, IdentityResolver([]))  # type: ignore[arg-type]
    return PressureCollector(context, node_root=node)


def samples(found: PressureCollector) -> dict[tuple[str, str, str], float]:
    values = {}
    for family in found.collect():
        for sample in family.samples:
            if family.name.startswith(("schedwatch_pressure", "schedwatch_node_pressure")):
                where = sample.labels.get("cgroup", "(node)")
                values[(family.name, where, sample.labels["resource"])] = sample.value
    return values


def test_outermost_stalled_cgroups_and_the_node_are_exported_in_seconds(tmp_path: Path) -> None:
    root = tree(tmp_path / "cgroup")
    node = tmp_path / "proc-pressure"
    node.mkdir()
    for resource in ("cpu", "memory", "io"):
        (node / resource).write_text((FIXTURES / f"proc-pressure-{resource}.txt").read_text())
    values = samples(collector(root, node))
    waiting, stalled = "schedwatch_pressure_waiting_seconds", "schedwatch_pressure_stalled_seconds"
    assert values[(waiting, "/work", "cpu")] == 2.5
    assert values[(stalled, "/work", "cpu")] == 1.0
    assert values[(waiting, "/work", "memory")] == 0.25
    assert values[(waiting, "/work", "io")] == 0.0
    assert values[(waiting, "/work/inner", "cpu")] == 0.9  # a workload of its own (a plain cgroup, not a container)
    assert not any(where == "/idle" for _name, where, _resource in values), "a cgroup that never stalled"
    cpu = parse_pressure((FIXTURES / "proc-pressure-cpu.txt").read_text())
    assert cpu is not None
    assert values[("schedwatch_node_pressure_waiting_seconds", "(node)", "cpu")] == cpu.some_us / 1e6


def test_without_psi_nothing_is_exported_and_check_says_why(tmp_path: Path) -> None:
    (tmp_path / "cgroup").mkdir()
    (tmp_path / "cgroup" / "cgroup.procs").write_text("")
    (tmp_path / "cgroup" / "work").mkdir()  # a cgroup2 directory without *.pressure files: no PSI in this kernel
    no_psi = tmp_path / "no-proc-pressure"
    assert samples(collector(tmp_path / "cgroup", no_psi)) == {}
    assert not node_pressure_available(no_psi)
    assert node_pressure_available() == check(None).ok  # type: ignore[arg-type]


def test_a_cgroup_that_ran_nothing_serves_its_last_totals_until_its_cpu_stat_moves(tmp_path: Path) -> None:
    root = tree(tmp_path / "cgroup")
    node = tmp_path / "proc-pressure"
    node.mkdir()
    (root / "work" / "cpu.stat").write_text("usage_usec 100\n")
    found = collector(root, node)
    waiting = "schedwatch_pressure_waiting_seconds"
    assert samples(found)[(waiting, "/work", "cpu")] == 2.5
    (root / "work" / "cpu.pressure").write_text(psi(3_000_000, 1_000_000))
    assert samples(found)[(waiting, "/work", "cpu")] == 2.5  # idle since: not read again (the gate)
    (root / "work" / "cpu.stat").write_text("usage_usec 180\n")
    assert samples(found)[(waiting, "/work", "cpu")] == 3.0  # it ran: read again
    assert samples(found)[(waiting, "/work/inner", "cpu")] == 0.9  # no cpu.stat to tell: read every scrape


def test_a_workload_whose_totals_stand_serves_the_same_blocks_of_rows(tmp_path: Path) -> None:
    """Each workload's rows are a block made once while its totals stand: the writer does not format them again, and
    the standing evaluation takes its last totals for them at once (docs/benchmarks.md: at 1,000 workloads every
    pressure row was read again at every evaluation)."""
    root = tree(tmp_path / "cgroup")
    (root / "work" / "cpu.stat").write_text("usage_usec 100\n")
    found = collector(root, tmp_path / "no-node-pressure")
    waiting, stalled = found.collect()[:2]
    assert [len(block) for block in waiting.blocks] == [3, 3]  # /work and /work/inner: cpu, memory and io each
    assert [len(block) for block in stalled.blocks] == [3, 3]
    again_waiting, again_stalled = found.collect()[:2]
    assert all(new is old for new, old in zip(again_waiting.blocks, waiting.blocks, strict=True))
    assert all(new is old for new, old in zip(again_stalled.blocks, stalled.blocks, strict=True))
    (root / "work" / "cpu.pressure").write_text(psi(3_000_000, 1_000_000))
    (root / "work" / "cpu.stat").write_text("usage_usec 180\n")
    moved = found.collect()[0]
    assert moved.blocks[0] is not waiting.blocks[0] and ((("", "", "", "", "/work", "cpu"), 3.0)) in moved.blocks[0]
    assert moved.blocks[1] is waiting.blocks[1]
