"""cgroup CPU files (v1 and v2) on trees laid out like a real host's."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.machine.cgroups.cpu import read_cpu_v1, read_cpu_v2
from agent.machine.cgroups.files import count_threads, first_process, parse_flat_keyed
from agent.machine.cgroups.layout import parse_proc_cgroup
from tests.unit.locations import UNIT_FIXTURES

# As the kernel writes them (v1 cpu.stat from this development VM; v2 from the cgroup-v2 documentation's keys).
V1_CPU_STAT = "nr_periods 51\nnr_throttled 50\nthrottled_time 7489000000\nnr_bursts 0\nburst_time 0\n"
V2_CPU_STAT = (
    "usage_usec 2511224\nuser_usec 2498710\nsystem_usec 12514\nnr_periods 31\nnr_throttled 29\n"
    "throttled_usec 1423518\nnr_bursts 0\nburst_usec 0\n"
)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_flat_keyed_ignores_what_is_not_a_number() -> None:
    assert parse_flat_keyed("a 1\nb -1\nc x\n\n") == {"a": 1, "b": -1}


def test_proc_cgroup_of_a_hybrid_host() -> None:
    paths = parse_proc_cgroup((UNIT_FIXTURES / "proc-self-cgroup-hybrid.txt").read_text())
    assert paths[""] == "/"  # the cgroup2 line, "0::/"
    assert paths["cpu"] == "/" and paths["cpuset"] == "/"
    assert paths["name=systemd"] == "/"


def test_proc_cgroup_with_comma_joined_controllers() -> None:
    paths = parse_proc_cgroup("4:cpu,cpuacct:/docker/abc\n3:cpuset:/docker/abc\n0::/system.slice/docker.service\n")
    assert paths == {
        "cpu": "/docker/abc",
        "cpuacct": "/docker/abc",
        "cpuset": "/docker/abc",
        "": "/system.slice/docker.service",
    }


def v1_tree(tmp_path: Path, parent_quota: int = -1) -> tuple[Path, Path]:
    cpu = write(
        tmp_path / "cpu",
        {
            "cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
            "cpu.cfs_quota_us": "-1\n",
            "cpu.cfs_period_us": "100000\n",
            "libpod_parent/cpu.cfs_quota_us": f"{parent_quota}\n",
            "libpod_parent/cpu.cfs_period_us": "100000\n",
            "libpod_parent/cpu.stat": V1_CPU_STAT,
            "libpod_parent/libpod-abc/cpu.stat": V1_CPU_STAT,
            "libpod_parent/libpod-abc/cpu.cfs_quota_us": "50000\n",
            "libpod_parent/libpod-abc/cpu.cfs_period_us": "100000\n",
        },
    )
    cpuset = write(
        tmp_path / "cpuset",
        {
            "cpuset.effective_cpus": "0-1\n",
            "libpod_parent/libpod-abc/cpuset.effective_cpus": "0-1\n",
        },
    )
    return cpu, cpuset


def test_v1_quota_and_throttling(tmp_path: Path) -> None:
    cpu, cpuset = v1_tree(tmp_path)
    control = read_cpu_v1(cpu, "/libpod_parent/libpod-abc", cpuset, "/libpod_parent/libpod-abc", online_cpus=2)
    assert control is not None
    assert (control.periods, control.throttled_periods, control.throttled_ns) == (51, 50, 7_489_000_000)
    assert control.limit_cores == 0.5


def test_v1_tighter_ancestor_quota_wins(tmp_path: Path) -> None:
    cpu, cpuset = v1_tree(tmp_path, parent_quota=25000)
    control = read_cpu_v1(cpu, "/libpod_parent/libpod-abc", cpuset, "/libpod_parent/libpod-abc", online_cpus=2)
    assert control is not None and control.limit_cores == 0.25


def test_v1_cpuset_tighter_than_quota(tmp_path: Path) -> None:
    cpu, cpuset = v1_tree(tmp_path)
    (cpu / "libpod_parent/libpod-abc/cpu.cfs_quota_us").write_text("300000\n")
    (cpuset / "libpod_parent/libpod-abc/cpuset.effective_cpus").write_text("1\n")
    control = read_cpu_v1(cpu, "/libpod_parent/libpod-abc", cpuset, "/libpod_parent/libpod-abc", online_cpus=2)
    assert control is not None and control.limit_cores == 1.0


def test_v1_missing_cgroup_is_none(tmp_path: Path) -> None:
    cpu, cpuset = v1_tree(tmp_path)
    assert read_cpu_v1(cpu, "/gone", cpuset, "/gone", online_cpus=2) is None


def test_v2_cpu_max_and_stat(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "cgroup.procs": "",
            "cpu.stat": "usage_usec 1\n",
            "kubepods.slice/cpu.max": "max 100000\n",
            "kubepods.slice/pod.slice/cpu.max": "150000 100000\n",
            "kubepods.slice/pod.slice/cpu.stat": V2_CPU_STAT,
            "kubepods.slice/pod.slice/cpuset.cpus.effective": "0-3\n",
            "kubepods.slice/pod.slice/cgroup.threads": "101\n102\n103\n",
            "kubepods.slice/pod.slice/cgroup.procs": "101\n",
        },
    )
    control = read_cpu_v2(root, "/kubepods.slice/pod.slice", online_cpus=8)
    assert control is not None
    assert (control.periods, control.throttled_periods, control.throttled_ns) == (31, 29, 1_423_518_000)
    assert control.limit_cores == 1.5
    assert count_threads(root, "/kubepods.slice/pod.slice") == 3
    assert first_process(root, "/kubepods.slice/pod.slice") == 101


def test_v2_without_the_cpu_controller_is_none(tmp_path: Path) -> None:
    root = write(tmp_path, {"a/cpu.stat": "usage_usec 10\nuser_usec 5\nsystem_usec 5\n"})
    assert read_cpu_v2(root, "/a", online_cpus=2) is None
    assert count_threads(root, "/gone") is None


@pytest.mark.parametrize(("cpuset", "limit"), [("0-2\n", 3.0), ("\n", 8.0), ("3-1\n", 8.0), ("0-1,x\n", 8.0)])
def test_v2_cpuset_limits_by_its_cpus_and_a_malformed_one_limits_nothing(
    tmp_path: Path, cpuset: str, limit: float
) -> None:
    root = write(tmp_path, {"a/cpu.stat": V2_CPU_STAT, "a/cpuset.cpus.effective": cpuset})
    control = read_cpu_v2(root, "/a", online_cpus=8)
    assert control is not None and control.limit_cores == limit
