"""Running a command for `schedwatch verify`: a fresh cgroup per run, counted by the BPF programs loaded in this
process (as ``schedwatch run`` loads them), with its CPU time from the cgroup's cpu.stat."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import assembly, config, metrics
from agent.collectors import registry
from agent.diagnosis.facts import Workload
from agent.diagnosis.inputs.processes.workload import WorkloadFacts, gather_workload
from agent.machine.cgroups.cpu import CpuUsage, read_usage_v2
from agent.machine.cgroups.files import count_threads
from agent.machine.cgroups.layout import read_layout
from agent.machine.procfs import ProcFS
from agent.machine.syscall_families import FAMILIES
from agent.series.reading import Reading, read_families
from agent.tables import families, syscalls

FACTS_AFTER_SECONDS = 1.0  # when the first run's processes are read (pools have started by then)
FACTS_INTERVAL_SECONDS = 0.5
COLLECT_INTERVAL_SECONDS = 0.5  # how often the run's counts are collected while it runs (procfs mode needs it)
PERIOD_US = 100_000


class VerifyError(Exception):
    """The runs cannot be measured here; the message says what to do."""


@dataclass(frozen=True)
class Counts:
    """What the collectors counted for one run's cgroup; None where the mode cannot count it (docs/modes.md), or
    where the machine cannot (page faults need a memory controller for the run's cgroup)."""

    sched_yield_calls: int | None
    futex_calls: dict[str, int] | None
    futex_wait_seconds: float | None
    runqueue_wait_seconds: float | None
    preempted_seconds: float | None
    syscalls_by_family: dict[str, int] | None = None
    processes_exited: int | None = None
    page_faults: int | None = None


@dataclass(frozen=True)
class Run:
    """One run of the command."""

    label: str  # "as is" or "fixed"
    repeat: int  # 1, 2, ... (--repeat)
    variables: dict[str, str]  # thread variables set for this run (empty: as it is)
    exit_status: int | None  # None: stopped at the duration limit
    wall_seconds: float
    user_seconds: float | None  # None: the cgroup's cpu.stat gave no user_usec and system_usec
    system_seconds: float | None
    counts: Counts
    threads_seen: int  # the most threads its cgroup held when read

    @property
    def stopped(self) -> bool:
        """Stopped at the duration limit: its wall time is a lower bound."""
        return self.exit_status is None

    @property
    def futex_total(self) -> int | None:
        """Futex calls of every operation; None where the mode cannot count them."""
        calls = self.counts.futex_calls
        return None if calls is None else sum(calls.values())


def median_run(runs: list[Run], label: str) -> Run:
    """The run of *label* whose wall time is the median (the lower middle one of an even count)."""
    chosen = sorted((run for run in runs if run.label == label), key=lambda run: run.wall_seconds)
    return chosen[(len(chosen) - 1) // 2]


class Counters:
    """The collectors `schedwatch run` would start for the chosen mode (--mode, with auto's fallback), loaded in this
    process, and read by the run's cgroup as a scrape reads them."""

    def __init__(self, agent: assembly.Agent, cgroup_root: Path) -> None:
        self.mode = agent.mode
        self._collector = agent.exporter()
        self._root = cgroup_root

    @classmethod
    @contextlib.contextmanager
    def loaded(cls, state_dir: Path, mode: str = "auto") -> Iterator[Counters]:
        """Open an agent as `run` does, without asking the runtimes; its collectors stop at the end."""
        settings = config.Settings(
            collectors=frozenset(registry()),
            state_dir=state_dir,
            max_processes=0,
            mode=mode,
            docker_sockets=(),
            cri_sockets=(),
            containerd_socket=None,
        )
        with assembly.open_agent(settings, runtimes=False, quiet=True) as agent:
            cgroup_root = agent.facts.cgroup_root
            if cgroup_root is None:
                raise VerifyError(
                    "needs a cgroup2 mount to count a run apart: mount -t cgroup2 none /sys/fs/cgroup/unified"
                )
            problem = agent.counting_problem()
            if problem is not None:
                raise VerifyError(f"nothing can count the runs: {problem}; `schedwatch check` says what to do")
            yield cls(agent, cgroup_root)

    def collect(self) -> None:
        """Collect once, as a scrape would: perf mode opens its counters for a cgroup made since, and procfs mode
        sees the run's threads while they live (a thread that exits unseen is not counted there)."""
        self._collector.collect_unserved()

    def read(self, directory: Path) -> Counts:
        """The counts of a cgroup made empty for one run (its cgroup2 *directory*): everything it counted."""
        reading = read_families(list(self._collector.collect()), time.monotonic())
        ref = Workload(cgroup="/" + str(directory.relative_to(self._root)))
        yields = reading.count(ref, metrics.SCHED_YIELD_CALLS)
        futex: dict[str, int] | None = None
        if syscalls.TABLE.collector in reading.up:
            futex = {op: int(reading.count(ref, metrics.FUTEX_CALLS, op) or 0) for op in syscalls.OPS.values}
        exited = reading.count(ref, metrics.PROCESSES_EXITED)
        return Counts(
            sched_yield_calls=None if yields is None else int(yields),
            futex_calls=futex,
            futex_wait_seconds=reading.count(ref, metrics.FUTEX_WAIT_SECONDS),
            runqueue_wait_seconds=reading.count(ref, metrics.RUNQUEUE_WAIT_SECONDS),
            preempted_seconds=reading.count(ref, metrics.OFFCPU_SECONDS, "preempted"),
            syscalls_by_family=_by_family(reading, ref),
            processes_exited=None if exited is None else int(exited),
            page_faults=_page_faults(reading, ref),
        )


def _by_family(reading: Reading, ref: Workload) -> dict[str, int] | None:
    """Calls by family of a run's cgroup: every family, 0 for those without a series, while the BPF families
    collector runs; None without it."""
    if families.TABLE.collector not in reading.up:
        return None
    totals = reading.workloads.get(ref)
    counts = totals.parts(metrics.SYSCALLS) if totals is not None else {}
    return {family: int(counts.get(family, 0)) for family in FAMILIES}


def _page_faults(reading: Reading, ref: Workload) -> int | None:
    """Minor and major page faults of a run's cgroup; None where no memory cgroup counted them."""
    totals = reading.workloads.get(ref)
    kinds = list(totals.parts(metrics.PAGE_FAULTS).values()) if totals is not None else []
    return int(sum(kinds)) if kinds else None


class Cgroups:
    """Where the runs go: a parent cgroup of this verify (with the quota, if any), a fresh child per run; on hybrid
    hosts also in the v1 memory hierarchy at the same path, so that the run's page faults are counted."""

    def __init__(self, unified: Path, cpu_v1: Path | None, quota: float | None, memory_v1: Path | None = None) -> None:
        name = f"schedwatch-verify-{os.getpid()}"
        self.parent = unified / name
        self.parent.mkdir()
        self.cpu_parent: Path | None = None
        self.memory_parent: Path | None = None
        if memory_v1 is not None and "memory" not in (unified / "cgroup.controllers").read_text().split():
            self.memory_parent = memory_v1 / name
            self.memory_parent.mkdir()
        self.quota = quota
        if quota is not None:
            if cpu_v1 is not None:  # hybrid host: the quota lives in the v1 cpu hierarchy
                self.cpu_parent = cpu_v1 / name
                self.cpu_parent.mkdir()
                (self.cpu_parent / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.cpu_parent / "cpu.cfs_quota_us").write_text(str(round(quota * PERIOD_US)))
            else:
                controllers = (unified / "cgroup.subtree_control").read_text().split()
                if "cpu" not in controllers:
                    raise VerifyError(f"--cpus needs the cpu controller: echo +cpu > {unified}/cgroup.subtree_control")
                (self.parent / "cgroup.subtree_control").write_text("+cpu")
                (self.parent / "cpu.max").write_text(f"{round(quota * PERIOD_US)} {PERIOD_US}")
        self._made: list[Path] = []

    @classmethod
    @contextlib.contextmanager
    def made(cls, quota: float | None) -> Iterator[Cgroups]:
        layout = read_layout()
        if layout.unified is None:
            raise VerifyError(
                "needs a cgroup2 mount to count a run apart: mount -t cgroup2 none /sys/fs/cgroup/unified"
            )
        cgroups = cls(layout.unified, layout.v1.get("cpu"), quota, layout.v1.get("memory"))
        try:
            yield cgroups
        finally:
            cgroups.remove()

    def cpus_allowed(self) -> float:
        """CPUs a run may use: this process's affinity, or the quota when it is tighter."""
        cpus = float(len(os.sched_getaffinity(0)))
        return cpus if self.quota is None else min(cpus, self.quota)

    def fresh(self, label: str) -> list[Path]:
        """A new, empty cgroup for one run: its cgroup2 directory first, then its v1 cpu and memory ones (if any)."""
        slug = label.replace(" ", "-")
        dirs = [self.parent / slug]
        for parent in (self.cpu_parent, self.memory_parent):
            if parent is not None:
                dirs.append(parent / slug)
        for directory in dirs:
            directory.mkdir()
            self._made.append(directory)
        return dirs

    def remove(self) -> None:
        """Empty and remove every cgroup made, children first."""
        for directory in [*reversed(self._made), *filter(None, (self.memory_parent, self.cpu_parent, self.parent))]:
            with contextlib.suppress(FileNotFoundError):
                kill_all(directory)
                try:
                    _rmdir(directory)
                except FileNotFoundError:
                    raise
                except OSError as error:
                    raise VerifyError(f"cannot remove {directory}: {error.strerror}; rmdir it by hand") from error


def kill_all(directory: Path, timeout: float = 10.0) -> None:
    """SIGKILL every process of a cgroup until none is left."""
    deadline = time.monotonic() + timeout
    while pids := (directory / "cgroup.procs").read_text().split():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        if time.monotonic() > deadline:
            raise VerifyError(
                f"processes {', '.join(pids)} of {directory} survive SIGKILL (stuck in the kernel): "
                f"once they are gone, rmdir {directory}"
            )
        time.sleep(0.02)


def _rmdir(directory: Path, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            raise
        except OSError:  # busy: exited processes linger a moment
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _joiner(dirs: list[Path]) -> Callable[[], None]:
    """Runs in the child between fork and exec: moves it into the run's cgroups, so all it starts is counted."""
    procs = [str(directory / "cgroup.procs") for directory in dirs]

    def join() -> None:
        for path in procs:
            with open(path, "w") as file:
                file.write(str(os.getpid()))

    return join


def run_once(
    label: str,
    repeat: int,
    command: list[str],
    variables: dict[str, str],
    counters: Counters,
    cgroups: Cgroups,
    limit: float,
    output: Any,
    read_facts: bool = False,
) -> tuple[Run, WorkloadFacts | None]:
    """Run *command* with *variables* set in a fresh cgroup until it exits or *limit* seconds pass."""
    dirs = cgroups.fresh(f"{label}-{repeat}")
    unified = dirs[0]
    counters.collect()
    environment = {**os.environ, **variables}
    before_cpu = _usage(unified)
    started = time.monotonic()
    process = subprocess.Popen(command, env=environment, preexec_fn=_joiner(dirs), stdout=output)
    ended: list[float] = []  # when it exited, noted by a thread of its own: reading facts must not delay it
    waiter = threading.Thread(target=lambda: ended.append((process.wait(), time.monotonic())[1]), daemon=True)
    waiter.start()
    facts: WorkloadFacts | None = None
    threads = 0
    collected = started
    while not ended:
        waiter.join(timeout=0.1)
        if time.monotonic() - collected >= COLLECT_INTERVAL_SECONDS:
            counters.collect()
            collected = time.monotonic()
        elapsed = time.monotonic() - started
        threads = max(threads, count_threads(unified.parent, unified.name) or 0)
        if elapsed >= limit:
            break
        if read_facts and facts is None and elapsed >= FACTS_AFTER_SECONDS and not ended:
            facts = gather_workload(ProcFS(), _pids(unified), FACTS_INTERVAL_SECONDS)
    exit_status = process.returncode if ended else None
    wall = (ended[0] if ended else time.monotonic()) - started
    kill_all(unified)  # what it left running (daemons), or all of it at the limit
    process.wait()
    user, system = cpu_seconds(before_cpu, _usage(unified))
    counts = counters.read(unified)
    return Run(label, repeat, variables, exit_status, wall, user, system, counts, threads), facts


def _usage(unified: Path) -> CpuUsage | None:
    return read_usage_v2(unified.parent, unified.name)


def cpu_seconds(before: CpuUsage | None, after: CpuUsage | None) -> tuple[float | None, float | None]:
    """User and system CPU seconds between two readings of a cgroup's cpu.stat; both None when either is unknown."""
    if before is None or after is None:
        return None, None
    return (after.user_ns - before.user_ns) / 1e9, (after.system_ns - before.system_ns) / 1e9


def _pids(unified: Path) -> list[int]:
    return [int(pid) for pid in (unified / "cgroup.procs").read_text().split()]
