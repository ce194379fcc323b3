"""Workloads keyed by process, for hosts without cgroup2: exact counts, exits, reused pids, a v1-only host.

On a host without cgroup2 every task sits in the cgroup2 root, so the kernel keys its totals by process and the
agent places each process by /proc/PID/cgroup. Here the same code runs on this hybrid host with
--workloads-by process, and, for a real v1-only view, in a mount namespace where cgroup2 is unmounted.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.identity.placement import PID_MASK
from tests.kernel.conftest import GRACE_SECONDS
from tests.support.agent import REPO, AgentProcess, agent_map_keys, require_root
from tests.support.scrape import missed_switches
from tests.support.workloads import CgroupSandbox, Workload

YIELDS = "schedwatch_sched_yield_calls_total"
# Alive for this long: placed by its announcement well before it exits, yet never seen by a scrape.
SHORT_LIFE = 0.3


def start_agent(log: Path, state: Path, *flags: str, prefix: tuple[str, ...] = ()) -> AgentProcess:
    agent = AgentProcess(log, "--series-grace", str(GRACE_SECONDS), "--state-dir", str(state), *flags, prefix=prefix)
    agent.wait_ready()
    return agent


@pytest.fixture(scope="module")
def process_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    require_root()
    work = tmp_path_factory.mktemp("process-agent")
    agent = start_agent(work / "agent.log", work, "--workloads-by", "process", "--process-top-k", "100")
    yield agent
    assert agent.stop() == 0, agent.log()


def yields_in(scrape_of: AgentProcess, cgroup: str) -> float:
    """The cgroup's yield count, whose series must exist."""
    value = scrape_of.scrape().value(YIELDS, cgroup=cgroup, container_id="")
    assert value is not None, f"no {YIELDS} series for cgroup {cgroup!r}"
    return value


def short_lived(binary: Path, group: Path | str, *args: int) -> int:
    """Run a workload that exits SHORT_LIFE seconds after its work; its pid."""
    workload = Workload(binary, group, *args)
    time.sleep(SHORT_LIFE)
    assert workload.release() == 0
    return workload.pid


def test_exited_processes_are_counted_exactly_in_their_cgroups(
    process_agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    first, second = cgroups.make("keys-a"), cgroups.make("keys-b")
    pids = {short_lived(yielder, first, 500, 2) for _ in range(6)}  # 1,000 each
    pids |= {short_lived(yielder, second, 700, 1) for _ in range(4)}
    a, b = cgroups.relative(first), cgroups.relative(second)
    assert (yields_in(process_agent, a), yields_in(process_agent, b)) == (6000, 2800)
    # Their kernel entries were moved at exit, folded in, and deleted: nothing left of them, nothing counted twice.
    left = [key for key in agent_map_keys(process_agent, "cgroups") if key & PID_MASK in pids]
    assert not left, [hex(key) for key in left]
    assert (yields_in(process_agent, a), yields_in(process_agent, b)) == (6000, 2800)


# Processes per case that exit the moment their work is done: gone before the agent hears of them.
INSTANT = 40


def run_instant_processes(yielder: Path, joined: str, born_in: Path) -> None:
    """INSTANT yielders that join *joined* themselves (a move), and INSTANT forked by a shell inside *born_in*."""
    for _ in range(INSTANT):
        Workload(yielder, joined, 250, 1, hold=False)
    loop = f"echo $$ > {born_in}/cgroup.procs && for i in $(seq {INSTANT}); do {yielder} - 250 1 0 >/dev/null; done"
    subprocess.run(["sh", "-c", loop], check=True)


def test_processes_that_exit_at_once_are_placed_by_what_the_kernel_announced(
    process_agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    moved, born = cgroups.make("instant-moved"), cgroups.make("instant-born")
    run_instant_processes(yielder, str(moved), born)
    assert yields_in(process_agent, cgroups.relative(moved)) == INSTANT * 250
    assert yields_in(process_agent, cgroups.relative(born)) == INSTANT * 250


def test_a_reused_pid_starts_from_zero_in_its_own_cgroup(
    process_agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    first, second = cgroups.make("reuse-a"), cgroups.make("reuse-b")
    process_agent.scrape()
    pid = short_lived(yielder, first, 1000, 1)
    attempts = 0
    while True:  # the next pid is a machine-wide counter: ask for ours back, retry if someone took it
        attempts += 1
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        workload = Workload(yielder, second, 2000, 1)
        time.sleep(SHORT_LIFE)
        workload.release()
        if workload.pid == pid:
            break
        assert attempts < 20, f"could not get pid {pid} again"
    # Every attempt's 2,000 in b (the last one under the reused pid), none of them in a.
    a, b = cgroups.relative(first), cgroups.relative(second)
    assert (yields_in(process_agent, a), yields_in(process_agent, b)) == (1000, 2000 * attempts)


def test_offcpu_time_is_placed_by_process_too(
    process_agent: AgentProcess, cgroups: CgroupSandbox, sleeper: Path
) -> None:
    group = cgroups.make("keys-sleep")
    workload = Workload(sleeper, group, 20, 10_000_000)
    try:
        scrape = process_agent.scrape()
        path = cgroups.relative(group)
        blocked = scrape.value("schedwatch_offcpu_seconds_total", cgroup=path, reason="blocked")
        assert blocked is not None, scrape.find("schedwatch_offcpu_seconds_total")
        slept = workload.truth["slept_ns"] / 1e9
        # Keyed by process, everything the process did counts where it is placed, including the wait in its
        # write to cgroup.procs when it joined (an RCU grace period; keyed by cgroup that counts in the parent's).
        # A sleep whose end the kernel did not deliver is not counted, and the switch it missed is.
        missed = missed_switches(scrape, cgroup=path)
        assert missed <= 2, f"the kernel did not deliver {missed} of 20 switches: too many to judge"
        lower = slept if missed == 0 else (20 - missed) * 0.01 * 0.99
        assert lower <= blocked <= slept + 0.05
    finally:
        workload.release()


def unmounting_cgroup2(cgroups: CgroupSandbox) -> tuple[str, ...]:
    """A command prefix running the rest in a mount namespace without cgroup2: a v1-only host, as the agent sees it."""
    if not cgroups.v1:
        raise RuntimeError("this test needs v1 cgroup hierarchies next to cgroup2 (a hybrid host)")
    return ("unshare", "-m", "sh", "-c", f'umount {cgroups.root} && exec "$@"', "sh")


def test_check_on_a_v1_only_host_says_how_workloads_are_keyed(cgroups: CgroupSandbox) -> None:
    check = [*unmounting_cgroup2(cgroups), sys.executable, "-m", "agent", "check"]
    auto = subprocess.run(check, cwd=REPO, capture_output=True, text=True)
    assert "workloads    by process, placed by /proc/PID/cgroup (no cgroup2 tree here)" in auto.stdout, auto.stdout
    forced = subprocess.run([*check, "--workloads-by", "cgroup"], cwd=REPO, capture_output=True, text=True)
    assert "use --workloads-by auto (or process), or pass the host's tree with --cgroup-root" in forced.stdout


@pytest.fixture(scope="module")
def v1_only_agent(tmp_path_factory: pytest.TempPathFactory, cgroups: CgroupSandbox) -> Iterator[AgentProcess]:
    """The agent in a mount namespace without cgroup2: it sees the v1 hierarchies alone, as on a v1-only host."""
    work = tmp_path_factory.mktemp("v1-agent")
    agent = start_agent(work / "agent.log", work, prefix=unmounting_cgroup2(cgroups))
    yield agent
    assert agent.stop() == 0, agent.log()


def test_v1_only_host_names_workloads_by_their_v1_cgroups(
    v1_only_agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    relative = f"/{cgroups.name}-v1only"
    joined = [cgroups.make_v1(hierarchy, relative) for hierarchy in ("name=systemd", "cpu")]
    (joined[1] / "cpu.cfs_period_us").write_text("100000")
    (joined[1] / "cpu.cfs_quota_us").write_text("50000")
    workload = Workload(yielder, ":".join(str(d) for d in joined), 3000, 2)
    try:
        scrape = v1_only_agent.scrape()
        assert scrape.value(YIELDS, cgroup=relative, container_id="") == 6000
        # cgroup_cpu walks the v1 cpu hierarchy when there is no cgroup2.
        assert scrape.value("schedwatch_cpu_limit_cores", cgroup=relative) == 0.5
        assert scrape.value("schedwatch_threads", cgroup=relative) == 1
    finally:
        workload.release()
    assert v1_only_agent.scrape().value(YIELDS, cgroup=relative, container_id="") == 6000  # kept after its exit


def test_v1_only_host_places_processes_that_exit_at_once(
    v1_only_agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    moved, born = f"/{cgroups.name}-v1moved", f"/{cgroups.name}-v1born"
    joined = ":".join(str(cgroups.make_v1(hierarchy, moved)) for hierarchy in ("name=systemd", "cpu"))
    run_instant_processes(yielder, joined, cgroups.make_v1("name=systemd", born))
    assert yields_in(v1_only_agent, moved) == INSTANT * 250
    assert yields_in(v1_only_agent, born) == INSTANT * 250
