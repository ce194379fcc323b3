"""System calls by family (bpf/families.bpf.c) against a workload that makes known calls through syscall(2).

The workload joins its cgroup after the dynamic loader and the C library have made their calls, and makes a few
fixed ones after its measured calls (its report, reads of stdin, exit_group). Each test therefore runs it twice:
once with every count 0 (the fixed calls alone) and once with the counts, each run in a cgroup of its own; the
difference between the two cgroups' series is exactly what the workload made. strace and perf stat, which count
from exec on, are compared the same way: by their difference between the two runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.diagnosis.inputs.artifacts import strace
from agent.machine import syscall_families
from tests.support.agent import AgentProcess, only_collectors
from tests.support.scrape import Scrape
from tests.support.workloads import CgroupSandbox, Workload, build

FAMILIES = syscall_families.FAMILIES
TRACEFS_EVENTS = Path("/sys/kernel/tracing/events/syscalls")
Counts = dict[str, int]


@dataclass(frozen=True)
class Calls:
    """What one run of tests/workloads/syscaller makes besides its fixed calls."""

    clock_gettime: int = 0
    nanosleep: int = 0
    sleep_ns: int = 1_000_000
    mmap: int = 0  # mmap + munmap pairs
    forks: int = 0
    getppid: int = 0

    def argv(self, group: Path) -> list[str]:
        return [
            str(group),
            *(str(n) for n in (self.clock_gettime, self.nanosleep, self.sleep_ns, self.mmap, self.forks, self.getppid)),
        ]


@dataclass(frozen=True)
class Run:
    """One finished run: its ground truth, its cgroup (as the agent labels it), and the wrapping tool's output."""

    truth: dict[str, Any]
    cgroup: str
    output: Path | None


@pytest.fixture(scope="module")
def syscaller() -> Path:
    return build("syscaller")


@pytest.fixture(scope="module")
def timing_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """An agent timing every workload's calls (--syscall-time all), with only this collector."""
    state = tmp_path_factory.mktemp("families-agent")
    process = AgentProcess(
        state / "agent.log",
        *only_collectors("syscall_families"),
        "--syscall-time",
        "all",
        "--state-dir",
        str(state),
    )
    process.wait_ready()
    yield process
    code = process.stop()
    assert code == 0, f"agent exited with {code} on SIGTERM:\n{process.log()}"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} is missing: run `scripts/setup.sh test` (installs linux-perf and strace)")
    return path


def run(
    syscaller: Path,
    cgroups: CgroupSandbox,
    calls: Calls,
    wrap: Callable[[Path], list[str]] | None = None,
    output: Path | None = None,
    prepare: Callable[[], object] | None = None,
) -> Run:
    """Run the workload to its end in a new cgroup (after *prepare*, once the cgroup is made), under the tool *wrap*
    gives for *output* if any."""
    group = cgroups.make("families")
    if prepare is not None:
        prepare()
    if wrap is None:
        return Run(Workload(syscaller, *calls.argv(group), hold=False).truth, cgroups.relative(group), None)
    assert output is not None
    command = [*wrap(output), str(syscaller), *calls.argv(group), "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{command[0]} failed with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    truth = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    return Run(truth, cgroups.relative(group), output)


def made(truth: dict[str, Any]) -> Counts:
    """The calls the workload says it made besides its fixed ones, by family."""
    counts = dict.fromkeys(FAMILIES, 0)
    for syscall in ("clock_gettime", "nanosleep", "mmap", "munmap", "clone", "wait4", "getppid"):
        counts[syscall_families.family_of(syscall)] += truth[syscall]
    counts[syscall_families.OTHER] += truth["child_exit_group"]  # each child's one call
    return counts


def exported(scrape: Scrape, name: str, cgroup: str) -> dict[str, float]:
    """Every family the agent exports for the plain cgroup *cgroup* (a family without calls has no series)."""
    found = {
        dict(labels)["family"]: value for labels, value in scrape.find(name, cgroup=cgroup, container_id="").items()
    }
    assert set(found) <= set(FAMILIES), found
    return found


def difference(measured: dict[str, float], empty: dict[str, float]) -> Counts:
    """measured - empty, by family. The two runs make the same fixed calls, so every family of the empty run is
    exported for the measured one too, and a family exported for neither made no call in either."""
    assert set(empty) <= set(measured), f"families of the empty run {sorted(empty)}, of the measured {sorted(measured)}"
    return {family: round(measured.get(family, 0) - empty.get(family, 0)) for family in FAMILIES}


def agent_difference(agent: AgentProcess, measured: Run, empty: Run) -> Counts:
    scrape = agent.scrape()
    return difference(
        exported(scrape, "schedwatch_syscalls_total", measured.cgroup),
        exported(scrape, "schedwatch_syscalls_total", empty.cgroup),
    )


def strace_families(summary: Path) -> Counts:
    """Calls by family in a `strace -f -c` summary (its table names turned into tracefs names)."""
    table = strace.parse(summary.read_text()).main
    counts = dict.fromkeys(FAMILIES, 0)
    for row in table.syscalls:
        counts[syscall_families.family_of(syscall_families.tracefs_name(row.name))] += row.calls
    return counts


@pytest.mark.parametrize(
    "calls",
    [
        Calls(clock_gettime=1, nanosleep=1, mmap=1, forks=1, getppid=1),
        Calls(clock_gettime=20_000, nanosleep=5, mmap=3_000, forks=40, getppid=50_000),
    ],
    ids=["one-each", "thousands"],
)
def test_calls_by_family_are_exact(agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path, calls: Calls) -> None:
    """The session agent (default flags: every workload counted, few timed) counts each family exactly."""
    empty = run(syscaller, cgroups, Calls())
    measured = run(syscaller, cgroups, calls)
    expected = made(measured.truth)
    assert expected[syscall_families.CLOCK] == calls.clock_gettime
    assert expected[syscall_families.MEMORY] == 2 * calls.mmap
    assert expected[syscall_families.PROCESS] == 2 * calls.forks
    assert agent_difference(agent, measured, empty) == expected
    scrape = agent.scrape()
    for run_ in (empty, measured):  # a family without calls has no series, rather than a 0
        assert 0 not in exported(scrape, "schedwatch_syscalls_total", run_.cgroup).values()
    assert syscall_families.NETWORK not in exported(scrape, "schedwatch_syscalls_total", measured.cgroup)


def exited(scrape: Scrape, cgroup: str) -> float:
    """The processes the agent counts as exited in the plain cgroup *cgroup* (the series must be there)."""
    return scrape.value("schedwatch_processes_exited_total", cgroup=cgroup, container_id="")


def test_processes_that_exit_are_counted_and_threads_are_not(
    agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path
) -> None:
    """40 children that exit at once (raw clone, exit_group) are 40 processes exited, beside the workload's own exit
    that the empty run has too; a process whose 50 threads end before it does is 1, not 51."""
    empty = run(syscaller, cgroups, Calls())
    measured = run(syscaller, cgroups, Calls(forks=40))
    group = cgroups.make("threads-exit")
    threads = Workload(build("threader"), group, 50, 10)
    assert threads.release() == 0
    scrape = agent.scrape()
    assert exited(scrape, empty.cgroup) == 1
    assert exited(scrape, measured.cgroup) - exited(scrape, empty.cgroup) == measured.truth["clone"] == 40
    assert exited(scrape, cgroups.relative(group)) == 1


def test_sleeps_land_in_sleep_seconds(timing_agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path) -> None:
    """20 sleeps of 10 ms: the time the kernel saw inside them is at least what was asked for and at most the
    wall time the workload measured around the loop."""
    sleeps, sleep_ns = 20, 10_000_000
    empty = run(syscaller, cgroups, Calls())
    measured = run(syscaller, cgroups, Calls(clock_gettime=100, nanosleep=sleeps, sleep_ns=sleep_ns, mmap=10))
    scrape = timing_agent.scrape()
    assert difference(
        exported(scrape, "schedwatch_syscalls_total", measured.cgroup),
        exported(scrape, "schedwatch_syscalls_total", empty.cgroup),
    ) == made(measured.truth)
    seconds = exported(scrape, "schedwatch_syscall_seconds_total", measured.cgroup)
    empty_seconds = exported(scrape, "schedwatch_syscall_seconds_total", empty.cgroup)
    assert syscall_families.SLEEP not in empty_seconds
    requested, around = sleeps * sleep_ns / 1e9, measured.truth["slept_ns"] / 1e9
    assert requested <= seconds[syscall_families.SLEEP] <= around, (seconds, around)
    # 100 clock reads and 10 mmap/munmap pairs: far under a millisecond each, but timed.
    assert 0 < seconds[syscall_families.CLOCK] < 0.05
    assert 0 < seconds[syscall_families.MEMORY] < 0.05
    timed = scrape.value("schedwatch_syscall_timed", cgroup=measured.cgroup, container_id="")
    assert timed == 1


def test_family_split_equals_strace_on_the_same_runs(
    timing_agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path, tmp_path: Path
) -> None:
    """strace -f -c of each run, by family: its difference between the runs is the agent's, and the workload's."""

    def under_strace(output: Path) -> list[str]:
        return [tool("strace"), "-f", "-c", "-o", str(output)]

    calls = Calls(clock_gettime=3_000, nanosleep=3, mmap=500, forks=10, getppid=7_000)
    empty = run(syscaller, cgroups, Calls(), under_strace, tmp_path / "empty.txt")
    measured = run(syscaller, cgroups, calls, under_strace, tmp_path / "measured.txt")
    assert empty.output is not None and measured.output is not None
    measured_counts, empty_counts = strace_families(measured.output), strace_families(empty.output)
    by_strace = {family: measured_counts[family] - empty_counts[family] for family in FAMILIES}
    # strace counts a call when it returns: exit_group never does, so each child's is missing from its table.
    by_strace[syscall_families.OTHER] += measured.truth["child_exit_group"]
    assert by_strace == made(measured.truth)
    assert agent_difference(timing_agent, measured, empty) == by_strace


def test_perf_stat_counts_every_system_call_while_the_programs_run(
    timing_agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path, tmp_path: Path
) -> None:
    """perf stat on raw_syscalls (the tracepoints the programs are attached to) counts every call of both runs."""
    events = ("raw_syscalls:sys_enter", "raw_syscalls:sys_exit")

    def under_perf(output: Path) -> list[str]:
        return [tool("perf"), "stat", "-x", ",", "-e", ",".join(events), "-o", str(output), "--"]

    def perf_counts(output: Path) -> dict[str, int]:
        counts = {}
        for line in output.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2] in events:
                assert fields[0].isdigit(), f"perf stat did not count {fields[2]}: {line}"
                counts[fields[2]] = int(fields[0])
        assert set(counts) == set(events), output.read_text()
        return counts

    calls = Calls(clock_gettime=5_000, nanosleep=2, mmap=1_000, forks=20, getppid=10_000)
    empty = run(syscaller, cgroups, Calls(), under_perf, tmp_path / "empty.csv")
    measured = run(syscaller, cgroups, calls, under_perf, tmp_path / "measured.csv")
    assert empty.output is not None and measured.output is not None
    before, after = perf_counts(empty.output), perf_counts(measured.output)
    total = sum(made(measured.truth).values())
    assert after["raw_syscalls:sys_enter"] - before["raw_syscalls:sys_enter"] == total
    # Every call returns but each child's exit_group; each child returns from its clone instead.
    assert after["raw_syscalls:sys_exit"] - before["raw_syscalls:sys_exit"] == total
    assert sum(agent_difference(timing_agent, measured, empty).values()) == total


def test_a_busy_workload_becomes_timed(agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path) -> None:
    """With default flags a workload making many calls per second is timed from the scrape that sees it; a quiet one
    stays counted only."""
    agent.scrape()
    busy = run(syscaller, cgroups, Calls(getppid=300_000))
    time.sleep(0.2)
    scrape = agent.scrape()  # sees the busy cgroup's rate and times it from now on
    assert exported(scrape, "schedwatch_syscall_seconds_total", busy.cgroup) == {}
    quiet = run(syscaller, cgroups, Calls())
    group = cgroups.root / busy.cgroup.lstrip("/")
    sleeps, sleep_ns = 5, 10_000_000
    again = Workload(syscaller, *Calls(nanosleep=sleeps, sleep_ns=sleep_ns).argv(group), hold=False).truth
    scrape = agent.scrape()
    assert scrape.value("schedwatch_syscall_timed", cgroup=busy.cgroup, container_id="") == 1
    seconds = exported(scrape, "schedwatch_syscall_seconds_total", busy.cgroup)
    assert sleeps * sleep_ns / 1e9 <= seconds[syscall_families.SLEEP] <= again["slept_ns"] / 1e9
    assert scrape.value("schedwatch_syscall_timed", cgroup=quiet.cgroup, container_id="") == 0
    assert exported(scrape, "schedwatch_syscall_seconds_total", quiet.cgroup) == {}


def test_every_listed_syscall_is_one_this_kernel_traces() -> None:
    """Each syscall the family table lists (for this architecture) has a tracepoint here, under the same name."""
    traced = {path.name.removeprefix("sys_enter_") for path in TRACEFS_EVENTS.glob("sys_enter_*")}
    assert len(traced) > 300, f"tracefs lists {len(traced)} syscalls"
    names = syscall_families.syscall_names(os.uname().machine)
    assert names is not None
    here = set(names.values())
    listed = {name for calls in syscall_families.FAMILY_SYSCALLS.values() for name in calls}
    assert sorted(listed & here - traced) == []
    # Every syscall this kernel traces has its number in the table: none is counted as OTHER for want of one.
    assert sorted(traced - here) == []


@pytest.fixture(scope="module")
def perf_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """An agent in perf mode (counting perf events, no BPF) with only its syscalls collector, counting families."""
    state = tmp_path_factory.mktemp("families-perf-agent")
    process = AgentProcess(
        state / "agent.log",
        "--mode",
        "perf",
        "--perf-syscall-families",
        "--collector.syscall_families",
        "--no-collector.sched",
        "--no-collector.cgroup_cpu",
        "--state-dir",
        str(state),
    )
    process.wait_ready()
    yield process
    code = process.stop()
    assert code == 0, f"agent exited with {code} on SIGTERM:\n{process.log()}"


def test_perf_mode_counts_the_families_it_can_exactly(
    perf_agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path
) -> None:
    """Without BPF the agent counts the calls of yield, futex, clock, sleep, poll, memory and process exactly, and
    exports nothing for the families it cannot count (file, network, other) nor any time. A cgroup's counters open
    at the first scrape that sees it."""
    empty = run(syscaller, cgroups, Calls(), prepare=perf_agent.scrape)
    calls = Calls(clock_gettime=4_000, nanosleep=3, mmap=700, forks=15, getppid=9_000)
    measured = run(syscaller, cgroups, calls, prepare=perf_agent.scrape)
    scrape = perf_agent.scrape()
    assert scrape.value("schedwatch_mode", mode="perf") == 1
    counted = difference(
        exported(scrape, "schedwatch_syscalls_total", measured.cgroup),
        exported(scrape, "schedwatch_syscalls_total", empty.cgroup),
    )
    expected = made(measured.truth)
    uncounted = {syscall_families.FILE, syscall_families.NETWORK, syscall_families.OTHER}
    assert {family: counted[family] for family in FAMILIES if family not in uncounted} == {
        family: expected[family] for family in FAMILIES if family not in uncounted
    }
    for cgroup in (measured.cgroup, empty.cgroup):
        assert set(exported(scrape, "schedwatch_syscalls_total", cgroup)) & uncounted == set()
    assert scrape.find("schedwatch_syscall_seconds_total") == {}


@pytest.fixture(scope="module")
def by_process_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """An agent keying the kernel's totals by process (as on hosts without cgroup2), timing every call."""
    state = tmp_path_factory.mktemp("families-by-process-agent")
    process = AgentProcess(
        state / "agent.log",
        "--workloads-by",
        "process",
        "--syscall-time",
        "all",
        "--collector.syscall_families",
        "--no-collector.syscalls",
        "--no-collector.sched",
        "--no-collector.cgroup_cpu",
        "--state-dir",
        str(state),
    )
    process.wait_ready()
    yield process
    code = process.stop()
    assert code == 0, f"agent exited with {code} on SIGTERM:\n{process.log()}"


def test_keyed_by_process_the_counts_are_the_same(
    by_process_agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path
) -> None:
    """Keyed by process, each process (the workload and its short-lived children) is placed in its cgroup, and the
    families add up as keyed by cgroup: the children's exit_group and the parent's clone and wait4 included."""
    empty = run(syscaller, cgroups, Calls())
    measured = run(syscaller, cgroups, Calls(clock_gettime=2_000, nanosleep=2, mmap=300, forks=25, getppid=4_000))
    assert agent_difference(by_process_agent, measured, empty) == made(measured.truth)
    seconds = exported(by_process_agent.scrape(), "schedwatch_syscall_seconds_total", measured.cgroup)
    assert seconds[syscall_families.SLEEP] >= 2 * Calls().sleep_ns / 1e9


def test_promtool_accepts_the_families_series(
    timing_agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path
) -> None:
    run(syscaller, cgroups, Calls(clock_gettime=10, nanosleep=1, mmap=1, forks=1, getppid=1))
    text = timing_agent.scrape().text
    assert "schedwatch_syscall_seconds_total{" in text and "schedwatch_syscall_timed{" in text
    done = subprocess.run(
        [tool("promtool"), "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


PERF_TRACE_OWN_LOSS = 0.05  # perf trace loses some events by itself here (tests/kernel/test_coexistence.py)


def perf_trace_families(summary: Path) -> Counts:
    """Calls by family in `perf trace -s` output, summed over its per-process tables."""
    counts = dict.fromkeys(FAMILIES, 0)
    for line in summary.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1].isdigit() and fields[2].isdigit() and not fields[0].startswith("-"):
            counts[syscall_families.family_of(syscall_families.tracefs_name(fields[0]))] += int(fields[1])
    return counts


def test_perf_trace_sees_the_calls_while_the_programs_run(
    timing_agent: AgentProcess, cgroups: CgroupSandbox, syscaller: Path, tmp_path: Path
) -> None:
    """perf trace -s on both runs while every call is timed: by family, what it counts is what the workload made
    (less what perf trace loses by itself), and the agent counts exactly."""

    def under_perf_trace(output: Path) -> list[str]:
        return [tool("perf"), "trace", "-s", "-o", str(output), "--"]

    calls = Calls(clock_gettime=3_000, nanosleep=2, mmap=200, forks=5, getppid=5_000)
    empty = run(syscaller, cgroups, Calls(), under_perf_trace, tmp_path / "empty.txt")
    measured = run(syscaller, cgroups, calls, under_perf_trace, tmp_path / "measured.txt")
    assert empty.output is not None and measured.output is not None
    expected = made(measured.truth)
    traced_measured, traced_empty = perf_trace_families(measured.output), perf_trace_families(empty.output)
    for family in (syscall_families.CLOCK, syscall_families.MEMORY, syscall_families.OTHER):
        traced = traced_measured[family] - traced_empty[family]
        assert (1 - PERF_TRACE_OWN_LOSS) * expected[family] <= traced <= expected[family], (family, traced)
    assert agent_difference(timing_agent, measured, empty) == expected
