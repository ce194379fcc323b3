"""Run a scenario in a cgroup of its own and read that cgroup's CPU files (v1 cpu and cpuacct here, or cgroup2)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agent.machine.cgroups.files import parse_flat_keyed
from tests.scenarios.catalog import Scenario
from tests.support.workloads import CgroupSandbox

PERIOD_US = 100_000
USER_HZ = os.sysconf("SC_CLK_TCK")
# Joins every cgroup directory given before "--", then becomes the command: nothing escapes the cgroup.
JOIN_THEN_EXEC = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 97; shift; done; shift; exec "$@"'
BASE_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR")


@dataclass(frozen=True)
class CpuUse:
    """CPU time a cgroup used (seconds, cumulative): all of it, and its user and system parts."""

    total: float
    user: float
    system: float


@dataclass(frozen=True)
class Throttling:
    """CFS quota enforcement so far (cumulative)."""

    periods: float
    throttled: float
    seconds: float


class ScenarioCgroup:
    """A fresh cgroup2 directory plus, on hybrid hosts, v1 cpu, cpuacct and memory ones at the same relative path (as
    a container has), with a CPU quota of *quota* cores and a memory limit of *memory_limit* bytes if given."""

    def __init__(self, sandbox: CgroupSandbox, name: str, quota: float | None, memory_limit: int | None = None) -> None:
        self.v2 = sandbox.make(name)
        self.label = sandbox.relative(self.v2)  # the agent's cgroup label
        self.cpuacct: Path | None = None
        self.memory: Path | None = None
        if "cpu" in sandbox.v1:
            self.cpu = sandbox.make_v1("cpu", self.label)
            if "cpuacct" in sandbox.v1 and sandbox.v1["cpuacct"] != sandbox.v1["cpu"]:
                self.cpuacct = sandbox.make_v1("cpuacct", self.label)
            if "memory" in sandbox.v1:
                self.memory = sandbox.make_v1("memory", self.label)
            self.dirs = [d for d in (self.v2, self.cpu, self.cpuacct, self.memory) if d is not None]
            if quota is not None:
                (self.cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.cpu / "cpu.cfs_quota_us").write_text(str(round(quota * PERIOD_US)))
            if memory_limit is not None:
                if self.memory is None:
                    raise RuntimeError("no v1 memory hierarchy on this hybrid host: cannot set a memory limit")
                (self.memory / "memory.limit_in_bytes").write_text(str(memory_limit))
        else:  # cgroup2 only: the controllers must be enabled for the parent's children
            wanted = "+cpu +memory" if memory_limit is not None else "+cpu"
            (self.v2.parent / "cgroup.subtree_control").write_text(wanted)
            self.cpu = self.v2
            self.dirs = [self.v2]
            if quota is not None:
                (self.v2 / "cpu.max").write_text(f"{round(quota * PERIOD_US)} {PERIOD_US}")
            if memory_limit is not None:
                (self.v2 / "memory.max").write_text(str(memory_limit))

    def cpu_use(self) -> CpuUse:
        """CPU the cgroup has used: cpuacct on v1, cpu.stat on cgroup2."""
        if self.cpuacct is not None or self.cpu != self.v2:
            accounting = self.cpuacct if self.cpuacct is not None else self.cpu
            stat = parse_flat_keyed((accounting / "cpuacct.stat").read_text())
            total = int((accounting / "cpuacct.usage").read_text()) / 1e9
            return CpuUse(total, stat["user"] / USER_HZ, stat["system"] / USER_HZ)
        stat = parse_flat_keyed((self.v2 / "cpu.stat").read_text())
        return CpuUse(stat["usage_usec"] / 1e6, stat["user_usec"] / 1e6, stat["system_usec"] / 1e6)

    def throttling(self) -> Throttling:
        stat = parse_flat_keyed((self.cpu / "cpu.stat").read_text())
        seconds = stat["throttled_time"] / 1e9 if "throttled_time" in stat else stat["throttled_usec"] / 1e6
        return Throttling(stat["nr_periods"], stat["nr_throttled"], seconds)

    def pids(self) -> list[int]:
        return [int(pid) for pid in (self.v2 / "cgroup.procs").read_text().split()]

    def threads(self) -> int:
        return len((self.v2 / "cgroup.threads").read_text().split())

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every process in the cgroup until it is empty."""
        deadline = time.monotonic() + timeout
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes {pids} of {self.label} survive SIGKILL")
            time.sleep(0.05)


def environment(scenario: Scenario) -> dict[str, str]:
    """A small environment: the basics of this one, none of its thread variables, plus the scenario's own."""
    base = {name: os.environ[name] for name in BASE_ENVIRONMENT if name in os.environ}
    return {**base, **scenario.environment()}


def start_in(group: ScenarioCgroup, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """*argv* started inside every directory of *group*."""
    dirs = [str(d) for d in group.dirs]
    return subprocess.Popen(
        ["sh", "-c", JOIN_THEN_EXEC, "join", *dirs, "--", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@contextlib.contextmanager
def running(
    scenario: Scenario, group: ScenarioCgroup, seconds: float, sandbox: CgroupSandbox
) -> Iterator[subprocess.Popen[bytes]]:
    """The scenario's command, started inside *group* for *seconds* (its companion first, in a cgroup of its own in
    *sandbox*); every process of both is killed on exit."""
    companion: tuple[ScenarioCgroup, subprocess.Popen[bytes]] | None = None
    if scenario.companion is not None:
        beside = ScenarioCgroup(sandbox, f"{scenario.name}-companion", None)
        companion = (beside, start_in(beside, scenario.companion(seconds), environment(scenario)))
    try:
        process = start_in(group, scenario.argv(seconds), environment(scenario))
        try:
            yield process
        finally:
            group.kill_all()
            process.wait(timeout=10)
    finally:
        if companion is not None:
            beside, started = companion
            beside.kill_all()
            started.wait(timeout=10)
            sandbox.remove(beside.v2)
