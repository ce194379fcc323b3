"""The cgroup_cpu collector on a cgroup2 tree laid out by the test: an idle cgroup's last reading is served again."""

from __future__ import annotations

from pathlib import Path

from agent.collectors import CollectorContext
from agent.collectors.cgroup_cpu import REFRESH_SECONDS, CgroupCpuCollector
from agent.config import Settings
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts


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
