"""The cgroup_cpu collector on a cgroup2 tree laid out by the test: an idle cgroup's last reading is served again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.collectors import CollectorContext
from agent.collectors.cgroup_cpu import REFRESH_SECONDS, CgroupCpuCollector
from agent.config import Settings
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts
from agent.machine.procfs import ProcFS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cpu_stat(usage_usec: int, nr_periods: int) -> str:
    return (
        f"usage_usec {usage_usec}\nuser_usec {usage_usec - 10}\nsystem_usec 10\n"
        f"nr_periods {nr_periods}\nnr_throttled 1\nthrottled_usec 500\n"
    )


def work_cgroup(root: Path, threads: str, stat: str) -> Path:
    """A cgroup2 root with the cpu controller and one cgroup, /work, at half a CPU."""
    (root / "cgroup.procs").write_text("")
    (root / "cgroup.controllers").write_text("cpu\n")
    work = root / "work"
    work.mkdir()
    (work / "cgroup.threads").write_text(threads)
    (work / "cpu.max").write_text("50000 100000\n")
    (work / "cpu.stat").write_text(stat)
    return work


def collector_over(root: Path, clock: Clock) -> CgroupCpuCollector:
    layout = CgroupLayout(unified=root, v1={})
    facts = MachineFacts("6.18", True, {}, False, None, None, "", layout, root, None)
    resolver = CgroupPathResolver(root)
    context = CollectorContext(Settings(), facts, resolver, None, IdentityResolver([]))  # type: ignore[arg-type]
    collector = CgroupCpuCollector(context)
    collector._clock = clock
    return collector


def read(collector: CgroupCpuCollector, clock: Clock) -> tuple[float, float, float, float]:
    """(threads, limit cores, periods, CPU seconds) of /work, each series present exactly once."""
    clock.now += 15  # a scrape interval
    families = {family.name: family for family in collector.collect()}

    def value(name: str, **extra: str) -> float:
        found = [
            s.value
            for s in families[name].samples
            if s.labels["cgroup"] == "/work" and all(s.labels.get(k) == v for k, v in extra.items())
        ]
        assert len(found) == 1, f"{name} of /work: {found}"
        return found[0]

    usage = value("schedwatch_cpu_usage_seconds", mode="user") + value("schedwatch_cpu_usage_seconds", mode="system")
    return value("schedwatch_threads"), value("schedwatch_cpu_limit_cores"), value("schedwatch_cpu_periods"), usage


def test_an_idle_cgroup_is_served_its_last_reading_until_it_runs_or_the_refresh_is_due(tmp_path: Path) -> None:
    work = work_cgroup(tmp_path, "101\n102\n", cpu_stat(2_000_000, 30))
    clock = Clock()
    collector = collector_over(tmp_path, clock)
    assert read(collector, clock) == (2, 0.5, 30, 2.0)

    # Idle (its CPU time stands): a new quota and thread are not read yet.
    (work / "cgroup.threads").write_text("101\n102\n103\n")
    (work / "cpu.max").write_text("25000 100000\n")
    assert read(collector, clock) == (2, 0.5, 30, 2.0)

    # It ran: everything is read again at once.
    (work / "cpu.stat").write_text(cpu_stat(3_000_000, 40))
    assert read(collector, clock) == (3, 0.25, 40, 3.0)

    # Idle again, and its quota lifted: shown once the refresh is due (at most 2 x REFRESH_SECONDS).
    (work / "cpu.max").write_text("max 100000\n")
    assert read(collector, clock)[1] == 0.25
    clock.now += 2 * REFRESH_SECONDS
    assert read(collector, clock) == (3, float(collector._cpus), 40, 3.0), "unlimited: every online CPU"


def test_a_cgroup_whose_cpu_time_cannot_be_read_is_read_whole_every_scrape(tmp_path: Path) -> None:
    work = work_cgroup(tmp_path, "101\n", "nr_periods 3\nnr_throttled 1\nthrottled_usec 500\n")  # no usage lines
    clock = Clock()
    collector = collector_over(tmp_path, clock)
    families = {family.name: family for family in collector.collect()}
    assert [s.value for s in families["schedwatch_threads"].samples if s.labels["cgroup"] == "/work"] == [1]
    (work / "cgroup.threads").write_text("101\n102\n")
    clock.now += 15
    families = {family.name: family for family in collector.collect()}
    assert [s.value for s in families["schedwatch_threads"].samples if s.labels["cgroup"] == "/work"] == [2]


def v1_host(root: Path) -> CgroupLayout:
    """A v1-only host as CentOS 7 lays it out: systemd's named tree, with a service in it that has no cpu cgroup
    of its own (no CPU accounting: it runs in its slice's), and a container mirrored in every hierarchy."""
    hierarchies = {"name=systemd": root / "systemd", "cpu": root / "cpu,cpuacct", "cpuacct": root / "cpu,cpuacct"}
    for path in ("", "/system.slice", "/system.slice/web.service", "/docker/abc"):
        (hierarchies["name=systemd"] / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for path in ("", "/system.slice", "/docker/abc"):
        (hierarchies["cpu"] / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    tasks = {"": "1\n", "/system.slice": "40\n", "/system.slice/web.service": "50\n51\n52\n", "/docker/abc": "60\n61\n"}
    for path, tids in tasks.items():
        directory = hierarchies["name=systemd"] / path.lstrip("/")
        (directory / "tasks").write_text(tids)
        (directory / "cgroup.procs").write_text(tids.split()[0] + "\n")
    quota = {"": "-1", "/system.slice": "150000", "/docker/abc": "50000"}
    for path, value in quota.items():
        directory = hierarchies["cpu"] / path.lstrip("/")
        (directory / "tasks").write_text("")
        (directory / "cgroup.procs").write_text("")
        (directory / "cpu.cfs_quota_us").write_text(f"{value}\n")
        (directory / "cpu.cfs_period_us").write_text("100000\n")
        (directory / "cpu.stat").write_text("nr_periods 10\nnr_throttled 4\nthrottled_time 7000000\n")
        (directory / "cpuacct.usage").write_text("3000000000\n")
        (directory / "cpuacct.stat").write_text("user 200\nsystem 100\n")
    # /proc of the service's first process: in the slice's cpu cgroup, its own directory in systemd's tree.
    proc = root / "proc" / "50"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text("2:cpu,cpuacct:/system.slice\n1:name=systemd:/system.slice/web.service\n0::/\n")
    return CgroupLayout(unified=None, v1=hierarchies)


def collected_by_workload(tmp_path: Path, layout: CgroupLayout, kernel: str) -> Callable[[str], dict[str, float]]:
    """One collection on the v1 host under *tmp_path*: a family's value by workload (user time, where split)."""
    facts = MachineFacts(kernel, True, {}, False, None, None, "", layout, None, None)
    context = CollectorContext(Settings(), facts, None, None, IdentityResolver([]))  # type: ignore[arg-type]
    collector = CgroupCpuCollector(context)
    collector._proc = ProcFS(tmp_path / "proc")
    families = {family.name: family for family in collector.collect()}

    def by_workload(name: str) -> dict[str, float]:
        return {s.labels["cgroup"]: s.value for s in families[name].samples if s.labels.get("mode") != "system"}

    return by_workload


def test_on_a_v1_host_threads_are_counted_in_systemds_tree_and_cpu_counters_only_in_their_own(tmp_path: Path) -> None:
    """The workloads are systemd's directories (where the BPF collectors place processes); a service without a cpu
    cgroup of its own has its threads and its slice's limit, but not its slice's throttling and CPU time."""
    layout = v1_host(tmp_path)
    by_workload = collected_by_workload(tmp_path, layout, "3.10.0")
    threads = by_workload("schedwatch_threads")
    assert threads["/system.slice/web.service"] == 3
    assert threads["/system.slice"] == 1
    assert by_workload("schedwatch_cpu_limit_cores")["/system.slice/web.service"] == 1.5  # its slice's quota binds it
    throttled = by_workload("schedwatch_cpu_throttled_periods")
    usage = by_workload("schedwatch_cpu_usage_seconds")
    assert "/system.slice/web.service" not in throttled and "/system.slice/web.service" not in usage
    assert throttled["/system.slice"] == 4 and usage["/system.slice"] == 2.0  # 3 s: 2 user, 1 system
    assert throttled["/docker/abc"] == 4 and by_workload("schedwatch_cpu_limit_cores")["/docker/abc"] == 0.5


def test_on_a_v1_host_a_cpu_cgroup_elsewhere_is_its_one_workloads_and_a_shared_one_nobodys(tmp_path: Path) -> None:
    """A runtime that keeps the cpu cgroup at another path than systemd's tree (found through /proc/PID/cgroup, no
    directory of the workload tree at that path) has its throttling and CPU time counted under its workload; a cpu
    cgroup elsewhere that two workloads' processes are in is counted under neither."""
    layout = v1_host(tmp_path)
    systemd, cpu = layout.v1["name=systemd"], layout.v1["cpu"]
    placed = {"/srv/app": ("70", "/limits/app"), "/batch/a": ("80", "/pool"), "/batch/b": ("90", "/pool")}
    for path, (pid, cpu_path) in placed.items():
        directory = systemd / path.lstrip("/")
        directory.mkdir(parents=True)
        (directory / "tasks").write_text(f"{pid}\n")
        (directory / "cgroup.procs").write_text(f"{pid}\n")
        (tmp_path / "proc" / pid).mkdir(parents=True)
        (tmp_path / "proc" / pid / "cgroup").write_text(f"2:cpu,cpuacct:{cpu_path}\n1:name=systemd:{path}\n")
    for cpu_path, (periods, throttled) in {"/limits/app": (30, 12), "/pool": (50, 20)}.items():
        directory = cpu / cpu_path.lstrip("/")
        directory.mkdir(parents=True)
        (directory / "cpu.cfs_quota_us").write_text("20000\n")
        (directory / "cpu.cfs_period_us").write_text("100000\n")
        (directory / "cpu.stat").write_text(f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time 9000\n")
        (directory / "cpuacct.usage").write_text("4000000000\n")
        (directory / "cpuacct.stat").write_text("user 300\nsystem 100\n")
    by_workload = collected_by_workload(tmp_path, layout, "6.1.0")
    assert by_workload("schedwatch_cpu_periods")["/srv/app"] == 30
    assert by_workload("schedwatch_cpu_throttled_periods")["/srv/app"] == 12
    assert by_workload("schedwatch_cpu_usage_seconds")["/srv/app"] == 3.0  # 4 s: 3 user, 1 system
    assert by_workload("schedwatch_cpu_limit_cores")["/srv/app"] == 0.2
    for shared in ("/batch/a", "/batch/b"):
        assert shared not in by_workload("schedwatch_cpu_periods")
        assert shared not in by_workload("schedwatch_cpu_usage_seconds")
        assert by_workload("schedwatch_cpu_limit_cores")[shared] == 0.2  # the limit binds each of them all the same
    assert by_workload("schedwatch_cpu_throttled_periods")["/docker/abc"] == 4  # mirrored ones as before
    assert "/system.slice/web.service" not in by_workload("schedwatch_cpu_throttled_periods")
