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

from agent import assembly
from agent.bpf import BpfUnavailable
from agent.bpf.probes.base import ProbeLimits
from agent.bpf.probes.sched import SchedProbe
from agent.bpf.probes.syscalls import FUTEX_OPS, SyscallProbe
from agent.diagnosis.inputs.processes.workload import WorkloadFacts, gather_workload
from agent.machine.cgroups import CpuUsage, count_threads, read_layout, read_usage_v2
from agent.machine.procfs import ProcFS

FACTS_AFTER_SECONDS = 1.0  # when the first run's processes are read (pools have started by then)
FACTS_INTERVAL_SECONDS = 0.5
PERIOD_US = 100_000


class VerifyError(Exception):
    """The runs cannot be measured here; the message says what to do."""


@dataclass(frozen=True)
class Counts:
    """What the BPF programs counted for one cgroup; None where its map held no entry (never ran)."""

    sched_yield_calls: int
    futex_calls: dict[str, int]
    futex_wait_seconds: float
    runqueue_wait_seconds: float | None
    preempted_seconds: float | None


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
    def futex_total(self) -> int:
        return sum(self.counts.futex_calls.values())


def median_run(runs: list[Run], label: str) -> Run:
    """The run of *label* whose wall time is the median (the lower middle one of an even count)."""
    chosen = sorted((run for run in runs if run.label == label), key=lambda run: run.wall_seconds)
    return chosen[(len(chosen) - 1) // 2]


class Counters:
    """The syscalls and sched BPF programs, loaded in this process."""

    def __init__(self, syscalls: SyscallProbe, sched: SchedProbe) -> None:
        self._syscalls = syscalls
        self._sched = sched

    @classmethod
    @contextlib.contextmanager
    def loaded(cls, state_dir: Path) -> Iterator[Counters]:
        """Mount tracefs and lay out kernel headers where needed, load both programs; detach them at the end."""
        facts = assembly.prepare(None, state_dir)
        tracefs = facts.tracefs
        if tracefs is None:
            raise VerifyError("tracefs is not mounted and cannot be: mount -t tracefs tracefs /sys/kernel/tracing")
        if facts.headers is None:
            raise VerifyError(facts.headers_error)
        limits = ProbeLimits()
        try:
            syscalls = SyscallProbe(limits, tracefs)
        except BpfUnavailable as error:
            raise VerifyError(f"{error} (`schedwatch check` says what this machine allows)") from error
        try:
            sched = SchedProbe(limits, tracefs)
        except BpfUnavailable as error:
            syscalls.close()
            raise VerifyError(f"{error} (`schedwatch check` says what this machine allows)") from error
        try:
            yield cls(syscalls, sched)
        finally:
            syscalls.close()
            sched.close()

    def read(self, cgroup_id: int) -> Counts:
        """The counts of a cgroup made empty for one run: no map entry means no event counted yet."""
        calls = self._syscalls.read().cgroups.get(cgroup_id)
        sched = self._sched.read().cgroups.get(cgroup_id)
        futex = dict.fromkeys(FUTEX_OPS, 0)
        if calls is not None:
            futex = dict(zip(FUTEX_OPS, calls.counts.futex_calls, strict=True))
        return Counts(
            sched_yield_calls=calls.counts.yields if calls else 0,
            futex_calls=futex,
            futex_wait_seconds=calls.counts.futex_wait_ns / 1e9 if calls else 0.0,
            runqueue_wait_seconds=sched.counts.runq_ns / 1e9 if sched else None,
            preempted_seconds=sched.counts.offcpu_ns[0] / 1e9 if sched else None,
        )


class Cgroups:
    """Where the runs go: a parent cgroup of this verify (with the quota, if any), a fresh child per run."""

    def __init__(self, unified: Path, cpu_v1: Path | None, quota: float | None) -> None:
        name = f"schedwatch-verify-{os.getpid()}"
        self.parent = unified / name
        self.parent.mkdir()
        self.cpu_parent: Path | None = None
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
        cgroups = cls(layout.unified, layout.v1.get("cpu"), quota)
        try:
            yield cgroups
        finally:
            cgroups.remove()

    def cpus_allowed(self) -> float:
        """CPUs a run may use: this process's affinity, or the quota when it is tighter."""
        cpus = float(len(os.sched_getaffinity(0)))
        return cpus if self.quota is None else min(cpus, self.quota)

    def fresh(self, label: str) -> list[Path]:
        """A new, empty cgroup for one run: its cgroup2 directory first, then its v1 cpu one (if any)."""
        slug = label.replace(" ", "-")
        dirs = [self.parent / slug]
        if self.cpu_parent is not None:
            dirs.append(self.cpu_parent / slug)
        for directory in dirs:
            directory.mkdir()
            self._made.append(directory)
        return dirs

    def remove(self) -> None:
        """Empty and remove every cgroup made, children first."""
        for directory in [*reversed(self._made), *filter(None, (self.cpu_parent, self.parent))]:
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
    cgroup_id = unified.stat().st_ino
    environment = {**os.environ, **variables}
    before_cpu = _usage(unified)
    started = time.monotonic()
    process = subprocess.Popen(command, env=environment, preexec_fn=_joiner(dirs), stdout=output)
    ended: list[float] = []  # when it exited, noted by a thread of its own: reading facts must not delay it
    waiter = threading.Thread(target=lambda: ended.append((process.wait(), time.monotonic())[1]), daemon=True)
    waiter.start()
    facts: WorkloadFacts | None = None
    threads = 0
    while not ended:
        waiter.join(timeout=0.1)
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
    counts = counters.read(cgroup_id)
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
