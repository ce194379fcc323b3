"""CPU limit, throttling and thread count from cgroup files, against the cgroup's own cpu.stat."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.machine.cgroups.files import parse_flat_keyed
from tests.support.agent import AgentProcess
from tests.support.workloads import CgroupSandbox, Workload

# A tenth of a CPU: two spinners are throttled in most periods unless the machine gives them less than that (a
# half was not enough beside two emulated VMs on this 2-CPU machine: 0 periods throttled).
QUOTA_US, PERIOD_US = 10_000, 100_000


def quota_cgroup(cgroups: CgroupSandbox, name: str, v1_name: str | None = None) -> tuple[Path, Path, str]:
    """A cgroup (cgroup2, or the placing v1 hierarchy) plus where its CPU quota of QUOTA_US per PERIOD_US lives:
    (the cgroup, its cpu dir, the dirs the workload joins)."""
    v2 = cgroups.make(name)
    if "cpu" not in cgroups.v1:  # unified host: the cpu controller lives in cgroup2
        (v2.parent / "cgroup.subtree_control").write_text("+cpu")
        (v2 / "cpu.max").write_text(f"{QUOTA_US} {PERIOD_US}")
        return v2, v2, str(v2)
    relative = cgroups.relative(v2) if v1_name is None else f"/{cgroups.name}-v1/{v1_name}"
    cpu = cgroups.make_v1("cpu", relative)
    (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (cpu / "cpu.cfs_quota_us").write_text(str(QUOTA_US))
    return v2, cpu, f"{v2}:{cpu}"


def throttling(cpu: Path) -> tuple[int, int, float]:
    stat = parse_flat_keyed((cpu / "cpu.stat").read_text())
    seconds = stat["throttled_time"] / 1e9 if "throttled_time" in stat else stat["throttled_usec"] / 1e6
    return stat["nr_periods"], stat["nr_throttled"], seconds


@pytest.mark.parametrize("layout", ["same path in every hierarchy", "v1 path found through /proc/PID/cgroup"])
def test_quota_throttling_matches_cpu_stat(
    agent: AgentProcess, cgroups: CgroupSandbox, spinner: Path, layout: str
) -> None:
    v1_name = None if layout.startswith("same") else "elsewhere"
    v2, cpu, dirs = quota_cgroup(cgroups, "quota", v1_name)
    workload = Workload(spinner, dirs, 2, 1.5, -1)  # two busy threads against a tenth of a CPU
    try:
        # The spinners go on while the agent reads: its values must lie between cpu.stat just before and after.
        before = throttling(cpu)
        scrape = agent.scrape()
        after = throttling(cpu)
        path = cgroups.relative(v2)
        labels = {"cgroup": path, "container_id": ""}
        assert before[1] >= 10, f"only {before[1]} throttled periods: the quota did not bite"
        names = ("cpu_periods_total", "cpu_throttled_periods_total", "cpu_throttled_seconds_total")
        for name, low, high in zip(names, before, after, strict=True):
            exported = scrape.value(f"schedwatch_{name}", **labels)
            assert exported is not None, f"no schedwatch_{name} series for {path}"
            assert low <= exported <= high, f"schedwatch_{name} = {exported}, cpu.stat went from {low} to {high}"
        assert scrape.value("schedwatch_cpu_limit_cores", **labels) == QUOTA_US / PERIOD_US
        assert scrape.value("schedwatch_threads", **labels) == 3  # main thread + two spinners
    finally:
        workload.release()


def test_unlimited_cgroup_reports_every_online_cpu(agent: AgentProcess, cgroups: CgroupSandbox, sleeper: Path) -> None:
    from agent.machine.cpus import online_cpu_count

    group = cgroups.make("unlimited")
    workload = Workload(sleeper, group, 1, 1000)
    try:
        labels = {"cgroup": cgroups.relative(group), "container_id": ""}
        scrape = agent.scrape()
        assert scrape.value("schedwatch_cpu_limit_cores", **labels) == online_cpu_count()
        assert scrape.value("schedwatch_threads", **labels) == 1
    finally:
        workload.release()
