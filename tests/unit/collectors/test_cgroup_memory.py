"""A cgroup's memory files read (agent/machine/cgroups/memory.py), and the cgroup_memory collector over trees laid out
by the test: what is exported, and what is not (a limit nobody set, an event that never happened)."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent.collectors import CollectorContext
from agent.collectors.cgroup_memory import CgroupMemoryCollector
from agent.config import Settings
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.cgroups.memory import MemoryState, read_memory_v1, read_memory_v2
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "cgroup-memory"
MIB = 1 << 20


def test_v1_files_of_a_file_reread_under_a_32_mib_limit() -> None:
    """Recorded here: a 64 MiB file read for 2 s under memory.limit_in_bytes of 32 MiB (tests/workloads/file_reader)."""
    state = read_memory_v1(FIXTURES / "v1", "/reread")
    assert state == MemoryState(
        limit_bytes=32 * MIB,
        high_bytes=None,
        events={"max": 5181, "oom_kill": 0},
        page_faults=258,
        major_page_faults=0,
        refaults=704_116,
    )


def test_v1_without_a_limit_has_none_and_a_cgroup_gone_nothing(tmp_path: Path) -> None:
    """v1 writes PAGE_COUNTER_MAX pages (this machine's root: 9223372036854771712) for "no limit": not a limit."""
    shutil.copytree(FIXTURES / "v1" / "reread", tmp_path / "unlimited")
    stat = tmp_path / "unlimited" / "memory.stat"
    stat.write_text(
        stat.read_text().replace("hierarchical_memory_limit 33554432", "hierarchical_memory_limit 9223372036854771712")
    )
    state = read_memory_v1(tmp_path, "/unlimited")
    assert state is not None and state.limit_bytes is None and state.events["max"] == 5181
    assert read_memory_v1(tmp_path, "/gone") is None


def test_v2_files_of_a_cgroup_oom_the_limit_of_its_ancestors_counts() -> None:
    """Written in cgroup2's format: the memory.events and memory.max of a 1 GiB allocation under MemoryMax=512M."""
    state = read_memory_v2(FIXTURES / "v2", "/user.slice/labm6.service")
    assert state is not None
    assert state.limit_bytes == 512 * MIB and state.high_bytes is None
    assert state.events == {"high": 0, "max": 35, "oom": 1, "oom_kill": 1}
    assert (state.page_faults, state.major_page_faults, state.refaults) == (131_650, 3, 112)


def test_v2_the_tightest_limit_over_the_ancestors_applies(tmp_path: Path) -> None:
    tree = tmp_path / "v2"
    shutil.copytree(FIXTURES / "v2", tree)
    (tree / "user.slice" / "memory.max").write_text(f"{256 * MIB}\n")
    (tree / "user.slice" / "memory.high").write_text(f"{200 * MIB}\n")
    state = read_memory_v2(tree, "/user.slice/labm6.service")
    assert state is not None and (state.limit_bytes, state.high_bytes) == (256 * MIB, 200 * MIB)


def collector_over(unified: Path, memory_v1: Path | None) -> CgroupMemoryCollector:
    layout = CgroupLayout(unified=unified, v1={} if memory_v1 is None else {"memory": memory_v1})
    facts = MachineFacts("6.18", True, {}, False, None, None, "", layout, unified, None)
    context = CollectorContext(
        Settings(),
        facts,
        CgroupPathResolver(unified),
        None,  # type: ignore[arg-type]
        IdentityResolver([]),
    )
    return CgroupMemoryCollector(context)


def samples(collector: CgroupMemoryCollector) -> dict[tuple[str, str, str], float]:
    """(metric, cgroup, event or kind) -> value of every sample of one collect."""
    found = {}
    for family in collector.collect():
        for sample in family.samples:
            extra = sample.labels.get("event") or sample.labels.get("kind") or ""
            found[(family.name, sample.labels.get("cgroup", ""), extra)] = sample.value
    return found


def test_the_collector_on_a_hybrid_host_reads_the_v1_twin(tmp_path: Path) -> None:
    """A cgroup2 tree without the memory controller, its v1 memory hierarchy beside it: /reread is read from its v1
    twin; /other, with no v1 twin and no process to ask, is not read at all."""
    unified, memory = tmp_path / "unified", tmp_path / "memory"
    for directory in (unified / "reread", unified / "other"):
        directory.mkdir(parents=True)
        (directory / "cgroup.procs").write_text("")
    (unified / "cgroup.procs").write_text("")
    (unified / "cgroup.controllers").write_text("hugetlb\n")
    shutil.copytree(FIXTURES / "v1" / "reread", memory / "reread")
    collector = collector_over(unified, memory)
    found = samples(collector)
    assert found[("schedwatch_memory_limit_bytes", "/reread", "")] == 32 * MIB
    assert found[("schedwatch_memory_events", "/reread", "max")] == 5181
    assert ("schedwatch_memory_events", "/reread", "oom_kill") not in found  # 0: it never happened
    assert found[("schedwatch_page_faults", "/reread", "minor")] == 258
    assert found[("schedwatch_page_faults", "/reread", "major")] == 0
    assert found[("schedwatch_memory_refaults", "/reread", "")] == 704_116
    assert not [key for key in found if key[1] == "/other"]
    # Its v1 twin appears later (the runtime made it after the cgroup2 directory): the next scrape reads it.
    shutil.copytree(FIXTURES / "v1" / "reread", memory / "other")
    assert samples(collector)[("schedwatch_memory_limit_bytes", "/other", "")] == 32 * MIB


def test_the_collector_on_cgroup2_with_the_memory_controller(tmp_path: Path) -> None:
    unified = tmp_path / "unified"
    shutil.copytree(FIXTURES / "v2", unified)
    (unified / "cgroup.procs").write_text("")
    (unified / "cgroup.controllers").write_text("cpu memory\n")
    for directory in (unified / "user.slice", unified / "user.slice" / "labm6.service"):
        (directory / "cgroup.procs").write_text("")
    found = samples(collector_over(unified, None))
    service = "/user.slice/labm6.service"
    assert found[("schedwatch_memory_limit_bytes", service, "")] == 512 * MIB
    assert found[("schedwatch_memory_events", service, "oom_kill")] == 1
    assert found[("schedwatch_memory_events", service, "max")] == 35
    assert found[("schedwatch_page_faults", service, "minor")] == 131_650 - 3
    # /user.slice has no memory.stat here: not read, nothing exported for it, and no limit from its "max".
    assert not [key for key in found if key[1] == "/user.slice"]


def test_the_collector_on_a_v1_host_reads_systemds_tree_and_each_memory_cgroup_once(tmp_path: Path) -> None:
    """No cgroup2 (CentOS 7, Docker CE's cgroupfs driver): the workloads are systemd's directories. /reread is read
    from its mirror in the memory hierarchy; a service in its slice's memory cgroup (no MemoryAccounting) is not
    given its slice's counters, which stay its slice's own. Before, the collector did not run at all there."""
    from agent.collectors.cgroup_memory import check
    from agent.machine.procfs import ProcFS

    systemd, memory = tmp_path / "systemd", tmp_path / "memory"
    for path in ("", "reread", "system.slice", "system.slice/web.service"):
        (systemd / path).mkdir(parents=True, exist_ok=True)
        (systemd / path / "cgroup.procs").write_text("50\n" if path.endswith("web.service") else "")
    shutil.copytree(FIXTURES / "v1" / "reread", memory / "reread")
    shutil.copytree(FIXTURES / "v1" / "reread", memory / "system.slice")
    (tmp_path / "proc" / "50").mkdir(parents=True)
    proc_cgroup = "3:memory:/system.slice\n1:name=systemd:/system.slice/web.service\n"
    (tmp_path / "proc" / "50" / "cgroup").write_text(proc_cgroup)
    layout = CgroupLayout(unified=None, v1={"name=systemd": systemd, "memory": memory})
    facts = MachineFacts("6.1.0", True, {}, False, None, None, "", layout, None, None)
    assert check(facts).ok
    context = CollectorContext(Settings(), facts, None, None, IdentityResolver([]))  # type: ignore[arg-type]
    collector = CgroupMemoryCollector(context)
    collector._proc = ProcFS(tmp_path / "proc")
    found = samples(collector)
    for workload in ("/reread", "/system.slice"):
        assert found[("schedwatch_memory_limit_bytes", workload, "")] == 32 * MIB
        assert found[("schedwatch_memory_events", workload, "max")] == 5181
    assert not [key for key in found if key[1] == "/system.slice/web.service"]
