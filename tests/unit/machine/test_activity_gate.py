"""A cgroup's last reading served while its cpu.stat stands, read again when it moves or its refresh time passes."""

from __future__ import annotations

from pathlib import Path

from agent.machine.cgroups.activity import ActivityGate, CpuStats

IDLE = "usage_usec 1000\nuser_usec 600\nsystem_usec 400\n"
RAN = "usage_usec 1250\nuser_usec 800\nsystem_usec 450\n"


def test_served_again_only_while_cpu_stat_stands_and_within_its_refresh() -> None:
    files = {"/cg/a/cpu.stat": IDLE}
    now = [0.0]
    gate = ActivityGate(Path("/cg"), files.get, refresh_seconds=60, clock=lambda: now[0])
    assert not gate.idle(16, "/a")  # never read: read it
    assert gate.idle(16, "/a")  # not a byte moved
    files["/cg/a/cpu.stat"] = RAN
    assert not gate.idle(16, "/a")  # it ran: read again
    assert gate.idle(16, "/a")
    now[0] = 59.0
    assert gate.idle(16, "/a")
    now[0] = 60.0  # id 16 refreshes after 60 s (ids spread it over 60-120 s)
    assert not gate.idle(16, "/a")


def test_a_cgroup_whose_cpu_stat_cannot_be_read_is_never_idle_and_gone_ones_are_forgotten() -> None:
    files = {"/cg/a/cpu.stat": IDLE, "/cg/b/cpu.stat": IDLE}
    gate = ActivityGate(Path("/cg"), files.get)
    assert not gate.idle(1, "/a") and not gate.idle(2, "/b")
    del files["/cg/a/cpu.stat"]
    assert not gate.idle(1, "/a")
    assert not gate.idle(1, "/a")
    gate.keep_only({1})
    assert len(gate) == 0  # /a unreadable, /b not kept


def test_cpu_stat_is_read_once_a_scrape_for_every_collector(tmp_path: Path) -> None:
    stat = tmp_path / "a" / "cpu.stat"
    stat.parent.mkdir()
    stat.write_text(IDLE)
    scrape: list[int | None] = [None]
    stats = CpuStats(tmp_path, 16, lambda: scrape[0])
    assert stats.read(str(stat)) == IDLE
    stat.write_text(RAN)
    assert stats.read(str(stat)) == RAN  # outside scrapes: read afresh each time
    scrape[0] = 1
    assert stats.read(str(stat)) == RAN
    stat.write_text(IDLE)
    assert stats.read(str(stat)) == RAN  # the same scrape: what its first reader read
    assert stats.read(str(tmp_path / "gone" / "cpu.stat")) is None
    scrape[0] = 2
    assert stats.read(str(stat)) == IDLE  # the next scrape reads it again
