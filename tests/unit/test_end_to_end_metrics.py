"""Fixtures -> /metrics, end to end, diffed against a golden exposition (as node_exporter's end-to-end test does).

The inputs were captured on the development VM (tests/support/end_to_end_capture.py; tests/unit/fixtures/README.md):
the snapshots the two BPF probes returned while known workloads ran in three cgroups, and those cgroups' files
(cgroup2, and the v1 cpu and cpuset hierarchies of that hybrid host) copied verbatim; and the on-CPU samples of a
program spinning in functions of known names, with the names the symbolizer gave them while it lived
(tests/support/code_capture.py). Here the snapshots are handed to the real syscalls, sched and oncpu collectors in
place of loaded programs, the cgroup_cpu collector reads the copied tree, and the real exporter serves them over HTTP
through the agent's own text writer. The whole answer, less the
series that differ from one run to the next (named in VOLATILE), must be the golden file line for line: a metric
renamed, a label added or a value changed fails here.

Regenerate after an intended change, then review the diff:
``SCHEDWATCH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_end_to_end_metrics.py``.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import __version__, metrics
from agent.bpf.probes.base import MapHealth
from agent.bpf.probes.oncpu import OnCpuSnapshot, Sample
from agent.bpf.probes.sched import SchedSnapshot
from agent.bpf.probes.syscalls import SyscallSnapshot
from agent.bpf.stats import ProgramStats
from agent.collectors import CollectorContext
from agent.collectors.cgroup_cpu import CgroupCpuCollector
from agent.collectors.oncpu import OnCpuCollector
from agent.collectors.sched import SchedCollector
from agent.collectors.syscalls import SyscallsCollector
from agent.config import Settings
from agent.diagnosis.standing import StandingFindings
from agent.exporter import AgentCollector, build_registry
from agent.identity.placement import CgroupKeys
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts
from agent.symbols.symbolizer import CodeName, Symbolizer
from agent.tables import sched, syscalls
from agent.tables.rows import Table
from agent.web import serve

FIXTURE = Path(__file__).parent / "fixtures" / "end-to-end"
TREE = FIXTURE / "cgroup"
GOLDEN = Path(__file__).parent / "fixtures" / "metrics" / "golden.prom"
UPDATE = os.environ.get("SCHEDWATCH_UPDATE_GOLDEN") == "1"
# Families whose values are this process's or this run's, not the fixtures': left out of the comparison, by name
# (each must be served, so that this list cannot outlive a rename).
VOLATILE = frozenset(
    {
        metrics.COLLECT_DURATION.name,  # wall time of each collector's collect()
        "process_cpu_seconds_total",  # agent.exposition.process: this test process's own
        "process_max_fds",
        "process_open_fds",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_virtual_memory_bytes",
    }
)
POD_CONTAINER = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"


def probes() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURE / "probes.json").read_text())
    return loaded


class FixtureProbe:
    """A probe that returns a captured snapshot instead of reading loaded maps."""

    def __init__(self, snapshot: SyscallSnapshot | SchedSnapshot, programs: Iterable[dict[str, Any]]) -> None:
        self.snapshot = snapshot
        self.programs = [ProgramStats(**program) for program in programs]
        self.forgotten: list[int] = []

    def read(self) -> SyscallSnapshot | SchedSnapshot:
        return self.snapshot

    def read_cgroups(self, keys: Iterable[int]) -> dict[int, Any]:
        return {key: self.snapshot.cgroups[key] for key in keys if key in self.snapshot.cgroups}

    def program_stats(self) -> list[ProgramStats]:
        return self.programs

    call_sites = 0  # the capture counted none

    def read_call_sites(self, moved_only: bool = False) -> None:
        return None

    def forget_call_sites(self, sites: Iterable[Any]) -> list[Any]:
        return []

    def choose_site_workloads(self, keys: Iterable[int]) -> None:
        pass

    def announce_site_processes(self, on_process: Callable[[int], object]) -> None:
        pass  # none counted

    def forget_cgroups(self, cgroup_ids: Iterable[int]) -> None:
        self.forgotten.extend(cgroup_ids)

    def close(self) -> None:
        pass


class ReplayedSamples:
    """The sampling program's one read of the capture (code.json), then nothing: the map is emptied by a read."""

    frequency = 199

    def __init__(self, captured: dict[str, Any], ids: dict[str, int]) -> None:
        self.frequency = captured["frequency"]
        self._pending = [
            Sample(ids[row["cgroup"]], row["pid"], row["address"], row["kernel"], row["count"])
            for row in captured["samples"]
        ]
        self._filled = len(self._pending)

    def read(self) -> OnCpuSnapshot:
        """The captured samples at the first read; later reads find the map filled as far again, with nothing new
        (what an idle workload's map holds between reads)."""
        samples, self._pending = self._pending, []
        return OnCpuSnapshot(samples, MapHealth({"samples": self._filled}, {"samples": 16384}, {"samples": 0}))

    def program_stats(self) -> list[ProgramStats]:
        return [ProgramStats("on_cpu_sample", 0, 0.0, 0)]

    def close(self) -> None:
        pass


class ReplayedNames(Symbolizer):
    """The names the real symbolizer gave each address at the capture, while the process lived."""

    def __init__(self, captured: dict[str, Any]) -> None:
        super().__init__()
        self._names = {
            (row["pid"], row["address"]): CodeName(row["library"], row["version"], row["function"])
            for row in captured["samples"]
        }

    def user(self, pid: int, address: int) -> CodeName:
        return self._names[(pid, address)]

    def kernel(self, address: int) -> CodeName:
        return next(name for (_pid, at), name in self._names.items() if at == address)


def cgroup_ids() -> dict[str, int]:
    """The copied tree's directories by path, as cgroup ids (what the BPF maps were keyed by on the host)."""
    return {path: cgroup_id for cgroup_id, path in CgroupPathResolver(TREE / "unified").snapshot().items()}


def decoded(table: Table, fields: dict[str, Any]) -> tuple[int, ...]:
    """A captured `cgroups` value (its struct's fields by name) decoded as the probe decodes it for the collector;
    a field the table reads and the capture lacks is a capture older than the row: take it again."""
    layout = table.layout
    missing = sorted({name for name, _slots in layout.fields} - set(fields))
    assert not missing, f"probes.json lacks {missing} of table {table.collector}: capture it again (fixtures/README.md)"
    value = layout.value_type()()
    for name, number in fields.items():
        if isinstance(number, list):
            getattr(value, name)[:] = number
        else:
            setattr(value, name, number)
    return layout.vector(value)


def syscall_snapshot(captured: dict[str, Any], ids: dict[str, int]) -> SyscallSnapshot:
    cgroups = {ids[path]: decoded(syscalls.TABLE, entry) for path, entry in captured["cgroups"].items()}
    return SyscallSnapshot(cgroups, {}, MapHealth(**captured["health"]))


def sched_snapshot(captured: dict[str, Any], ids: dict[str, int]) -> SchedSnapshot:
    cgroups = {ids[path]: decoded(sched.TABLE, entry) for path, entry in captured["cgroups"].items()}
    return SchedSnapshot(cgroups, {}, MapHealth(**captured["health"]))


def served_metrics(captured: dict[str, Any], scrapes: int = 1) -> list[str]:
    """The agent's /metrics over the fixtures, as it is wired by `schedwatch run` (default settings): each of
    *scrapes* consecutive answers."""
    code = json.loads((FIXTURE / "code.json").read_text())
    layout = CgroupLayout(unified=TREE / "unified", v1={"cpu": TREE / "cpu", "cpuset": TREE / "cpuset"})
    facts = MachineFacts(captured["kernel_release"], True, {}, False, None, None, "", layout, TREE / "unified", None)
    resolver = CgroupPathResolver(TREE / "unified")
    identities = IdentityResolver([])  # no runtime: containers are named by their id alone
    context = CollectorContext(Settings(), facts, resolver, CgroupKeys(resolver), identities)
    ids = cgroup_ids()
    programs = captured["programs"]
    running = {
        "syscalls": SyscallsCollector(
            context, FixtureProbe(syscall_snapshot(captured["syscalls"], ids), programs["syscalls"])
        ),
        "sched": SchedCollector(context, FixtureProbe(sched_snapshot(captured["sched"], ids), programs["sched"])),
        "cgroup_cpu": CgroupCpuCollector(context, online_cpus=lambda: int(captured["online_cpus"])),
        "oncpu": OnCpuCollector(context, ReplayedSamples(code, ids), ReplayedNames(code)),  # type: ignore[arg-type]
    }
    exporter = AgentCollector(
        running,
        {},
        facts.release,
        lambda: True,  # the capture ran with BPF_ENABLE_STATS, as `run --bpf-stats`
        identities,
        StandingFindings(captured["online_cpus"]),
        mode="bpf",
        cgroup_paths=resolver,
    )
    server = serve(build_registry(exporter), "127.0.0.1", 0, max_connections=4, timeout=5)
    try:
        answers = []
        for _ in range(scrapes):
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as answer:
                answers.append(answer.read().decode("utf-8"))
        return answers
    finally:
        server.stop()
        for collector in running.values():
            collector.close()


def comparable(text: str) -> str:
    """The exposition less the VOLATILE families, the agent's version shown as (version), and each family's series
    in the order of their label values (a histogram's lines kept together, in their order): the cgroup_cpu
    collector lists cgroups in the order the filesystem lists directories."""
    out: list[str] = []
    served = set()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("# HELP "):
            continue
        name = line.split()[2]
        served.add(name)
        samples = []
        for sample in lines[index + 2 :]:
            if sample.startswith("# "):
                break
            samples.append(sample)
        if name not in VOLATILE:
            out += [line, lines[index + 1], *sorted(samples, key=series_of)]  # sorted() is stable
    assert served >= VOLATILE, f"VOLATILE names families that are not served: {sorted(VOLATILE - served)}"
    version = f'version="{__version__}"'
    assert any(version in line for line in out), "schedwatch_build_info carries the agent's version"
    return "\n".join(out).replace(version, 'version="(version)"') + "\n"


def series_of(sample_line: str) -> str:
    """A sample line's label values less its bucket bound: the series it belongs to."""
    labels = sample_line.partition("{")[2].rpartition("}")[0]
    return re.sub(r'(^|,)le="[^"]*"', "", labels)


def promtool_check(text: str) -> None:
    promtool = shutil.which("promtool") or shutil.which("promtool", path=str(Path(sys.executable).parent))
    assert promtool, "promtool is missing: run `sudo make test`, which installs it"
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def diff(expected: str, got: str) -> str:
    lines = difflib.unified_diff(expected.splitlines(), got.splitlines(), "golden.prom", "served", lineterm="", n=1)
    return "\n".join(list(lines)[:80])


def test_metrics_served_from_the_fixtures_are_the_golden_exposition() -> None:
    first, second = served_metrics(probes(), scrapes=2)
    promtool_check(first)
    got = comparable(first)
    if UPDATE:
        GOLDEN.write_text(got)
        pytest.fail(f"wrote {GOLDEN}: review `git diff`, commit it, and run again without SCHEDWATCH_UPDATE_GOLDEN")
    expected = GOLDEN.read_text()
    promtool_check(expected)
    assert got == expected, "/metrics differs from the golden exposition:\n" + diff(expected, got)
    assert comparable(second) == got, "nothing moved between two scrapes: the second answer is the first"


def test_the_golden_exposition_holds_what_the_captured_workloads_did() -> None:
    """The golden numbers are the workloads' ground truth, not just what the agent once said (the yielder made
    exactly 2 x 5,000 sched_yield calls; the spinner's cgroup had a quota of half a CPU on a cpuset of one)."""
    truth = {key: value for workload in probes()["truth"] for key, value in workload.items()}
    samples = {
        (sample.name, sample.labels.get("container_id", ""), sample.labels.get("cgroup", "")): sample.value
        for family in text_string_to_metric_families(GOLDEN.read_text())
        for sample in family.samples
    }
    assert samples[("schedwatch_sched_yield_calls_total", POD_CONTAINER, "")] == truth["yields"] == 10_000
    docker = "5b1b0e7f6c3a4d2e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e"
    assert samples[("schedwatch_cpu_limit_cores", docker, "")] == 0.5
    assert samples[("schedwatch_threads", docker, "")] == len(truth["tids"]) == 3
    assert samples[("schedwatch_cpu_throttled_periods_total", docker, "")] > 0
    assert samples[("schedwatch_cpu_limit_cores", "", "/schedwatch-golden/batch")] == 1.5
    # Each of the sleeper's 20 sleeps of 5 ms ended one blocked off-CPU period of its cgroup, and they add up to them.
    blocked = {
        sample.name: sample.value
        for family in text_string_to_metric_families(GOLDEN.read_text())
        for sample in family.samples
        if sample.labels.get("cgroup") == "/schedwatch-golden/batch" and sample.labels.get("reason") == "blocked"
    }
    assert blocked["schedwatch_offcpu_periods_total"] == 20
    assert blocked["schedwatch_offcpu_seconds_total"] >= 20 * 0.005


def test_one_count_changed_in_a_probe_snapshot_is_one_line_of_difference() -> None:
    """The diff sees a value: one more sched_yield call in the pod's snapshot changes exactly its one line."""
    captured = copy.deepcopy(probes())
    (path,) = [p for p in captured["syscalls"]["cgroups"] if p.endswith(POD_CONTAINER)]
    captured["syscalls"]["cgroups"][path]["yields"] += 1
    (served,) = served_metrics(captured)
    changed = set(comparable(served).splitlines()) ^ set(GOLDEN.read_text().splitlines())
    labels = f'container_id="{POD_CONTAINER}",container="",pod="",namespace="",cgroup=""'
    line = f"schedwatch_sched_yield_calls_total{{{labels}}}"
    assert changed == {f"{line} 10000.0", f"{line} 10001.0"}
