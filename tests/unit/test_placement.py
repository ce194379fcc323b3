"""Kernel keys -> places: cgroup ids, and processes placed by /proc/PID/cgroup (hosts without cgroup2)."""

from __future__ import annotations

from pathlib import Path

from agent.cgroups import CgroupLayout
from agent.collectors.common import CgroupTotals
from agent.identity.placement import EXIT_SPAN, EXITED_KEY_FLAG, ProcessKeys
from agent.identity.workload import REMOVED
from agent.procfs import ProcFS

V1_ONLY = CgroupLayout(unified=None, v1={"cpu": Path("/c"), "name=systemd": Path("/s"), "memory": Path("/m")})
HYBRID = CgroupLayout(unified=Path("/u"), v1={"cpu": Path("/c")})
FIXTURES = Path(__file__).parent / "fixtures" / "proc-cgroup"


class FakeProc:
    """A /proc with the processes a test starts and stops."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "self").mkdir(parents=True)
        (root / "self" / "stat").write_text("1 (x) S")

    def start(self, pid: int, start_ticks: int, cgroup_text: str, comm: str = "worker (1)") -> None:
        directory = self.root / str(pid)
        directory.mkdir(exist_ok=True)
        after_comm = ["S", *["0"] * 18, str(start_ticks), "0"]  # fields 3..23; field 22 is the start time
        (directory / "stat").write_text(f"{pid} ({comm}) {' '.join(after_comm)}\n")
        (directory / "cgroup").write_text(cgroup_text)

    def stop(self, pid: int) -> None:
        for name in ("stat", "cgroup"):
            (self.root / str(pid) / name).unlink()
        (self.root / str(pid)).rmdir()


def v1_cgroup(path: str, systemd: str | None = None) -> str:
    return f"5:memory:{path}\n3:cpu,cpuacct:{path}\n1:name=systemd:{systemd or path}\n0::/\n"


NOW_US = 100_000_000  # the boot clock at each test's scrape: 100 s after boot


def exited(pid: int, at_s: float = 99.0) -> int:
    """The key the kernel moves a dead process's entry to, for an exit *at_s* seconds after boot."""
    return EXITED_KEY_FLAG | (int(at_s * 1e6) & (EXIT_SPAN - 1)) << 32 | pid


def process_keys(root: Path, layout: CgroupLayout = V1_ONLY, **clocks: object) -> ProcessKeys:
    return ProcessKeys(layout, 100, ProcFS(root), boot_clock_us=lambda: NOW_US, **clocks)  # type: ignore[arg-type]


def test_v1_host_places_a_process_by_systemds_hierarchy_first(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/system.slice", systemd="/system.slice/cron.service"), comm="a) b (c")
    placement = process_keys(tmp_path).place([100])[100]
    assert placement.path == "/system.slice/cron.service"
    assert placement.source == (100, 50_000_000) and not placement.final  # 5000 ticks of 10 ms


def test_hybrid_host_uses_the_cgroup2_line(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 1, (FIXTURES / "podman-cgroupfs-hybrid.txt").read_text())
    path = process_keys(tmp_path, HYBRID).place([100])[100].path
    assert path is not None and path.startswith("/libpod_parent/libpod-")


def test_real_v1_lines_of_a_kubelet_pod(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 1, (FIXTURES / "containerd-cri-kubepods-burstable-hybrid.txt").read_text())
    path = process_keys(tmp_path).place([100])[100].path
    assert path is not None and path.startswith("/kubepods/burstable/pod")


def test_exited_key_is_placed_where_the_process_lived_and_is_final(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = process_keys(tmp_path)
    live = keys.place([100])[100]
    proc.stop(100)
    gone = keys.place([exited(100)])[exited(100)]
    assert (gone.source, gone.path, gone.final) == (live.source, "/a", True)
    # Another collector places its own exited key of the same process afterwards: the same answer.
    assert keys.place([exited(100, 98.5)])[exited(100, 98.5)] == gone


def test_reused_pid_is_a_new_process_in_its_own_place(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = process_keys(tmp_path)
    keys.place([100])
    proc.stop(100)
    proc.start(100, 9000, v1_cgroup("/b"))  # same pid, started at 90 s: another process
    places = keys.place([exited(100, 80.0), 100])
    assert (places[exited(100, 80.0)].path, places[exited(100, 80.0)].source) == ("/a", (100, 50_000_000))
    assert (places[100].path, places[100].source, places[100].final) == ("/b", (100, 90_000_000), False)


def test_announced_process_is_placed_even_if_it_exits_before_the_scrape(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/short"))
    keys = process_keys(tmp_path)
    keys.announce(100, 50_100_000_000)
    proc.stop(100)
    assert keys.place([exited(100)])[exited(100)].path == "/short"


def test_process_gone_before_it_was_read_is_unplaced_not_misplaced(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = process_keys(tmp_path)
    keys.place([100])  # a process seen earlier with this pid
    proc.stop(100)
    keys.announce(100, 70_000_000_000)  # another one, at 70 s, gone before /proc was read
    proc.start(100, 9000, v1_cgroup("/b"))  # and the pid reused once more
    places = keys.place([exited(100, 60.0), exited(100, 75.0), 100])
    assert places[exited(100, 60.0)].path == "/a"
    assert places[exited(100, 75.0)].path is None and places[exited(100, 75.0)].final
    assert places[100].path == "/b"


def test_two_processes_that_had_one_pid_between_scrapes_are_told_apart(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    keys = process_keys(tmp_path)
    for ticks, path in ((5000, "/first"), (6000, "/second")):
        proc.start(100, ticks, v1_cgroup(path))
        keys.announce(100, ticks * 10_000_000)
        proc.stop(100)
    places = keys.place([exited(100, 61.0), exited(100, 55.0)])
    assert (places[exited(100, 55.0)].path, places[exited(100, 61.0)].path) == ("/first", "/second")


def test_a_later_exit_is_not_given_to_a_process_that_already_exited(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    keys = process_keys(tmp_path)
    proc.start(100, 5000, v1_cgroup("/host"))
    keys.announce(100, 50_000_000_000)
    proc.stop(100)
    # Its exit at 60 s, and another process's at 75 s whose announcement never arrived (the ring was full).
    places = keys.place([exited(100, 75.0), exited(100, 60.0)])
    assert places[exited(100, 60.0)].path == "/host"
    assert places[exited(100, 75.0)].path is None


def test_exit_times_are_unwrapped_from_31_bits_of_microseconds(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 1000, v1_cgroup("/early"))  # started at 10 s
    late_now = 3 * EXIT_SPAN  # about an hour after boot: the 31-bit clock wrapped once
    keys = ProcessKeys(V1_ONLY, 100, ProcFS(tmp_path), boot_clock_us=lambda: late_now)
    keys.place([100])
    proc.stop(100)
    exit_us = late_now - 5_000_000
    key = EXITED_KEY_FLAG | (exit_us & (EXIT_SPAN - 1)) << 32 | 100
    assert keys.place([key])[key].path == "/early"


def test_gone_processes_are_forgotten_after_the_retention(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    now = [0.0]
    keys = process_keys(tmp_path, clock=lambda: now[0])
    proc.start(100, 5000, v1_cgroup("/a"))
    keys.place([100])
    proc.stop(100)
    keys.place([exited(100)])
    assert len(keys) == 1
    now[0] = ProcessKeys.RETAIN_SECONDS + 1
    keys.place([])
    assert len(keys) == 0


def test_a_process_whose_exit_never_came_is_forgotten_once_gone(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    now = [0.0]
    keys = process_keys(tmp_path, clock=lambda: now[0])
    proc.start(100, 5000, v1_cgroup("/a"))
    proc.start(200, 5000, v1_cgroup("/b"))
    keys.place([100, 200])
    proc.stop(100)  # its exited key never arrives (dropped from a full map)
    now[0] = ProcessKeys.RETAIN_SECONDS + 1
    keys.place([200])
    assert len(keys) == 1  # 200 still runs and is kept


def test_a_scrape_right_after_an_announcement_reads_the_place_again(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    keys = process_keys(tmp_path, clock=lambda: 5.0)  # the same instant
    proc.start(100, 5000, v1_cgroup("/parent"))
    keys.announce(100, 50_000_000_000)  # seen first before it joined its cgroup
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup("/own"))
    assert keys.place([100])[100].path == "/own"
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup("/moved"))
    assert keys.place([100])[100].path == "/own"  # the other collector, same scrape: the read is shared


def test_totals_follow_a_process_from_live_to_exited_key_without_double_counting(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = process_keys(tmp_path)
    freed: list[int] = []
    totals = CgroupTotals(keys, Names(), width=1, grace_seconds=60, forget=freed.extend)

    def rows() -> dict[str, int]:
        return {labels[4]: row[0] for labels, row in totals.rows()}

    totals.update({100: [10]})
    assert rows() == {"/a": 10}
    proc.stop(100)
    totals.update({exited(100): [15]})  # the kernel moved the entry at exit; 5 more were counted before
    assert rows() == {"/a": 15}
    assert freed == [exited(100)]
    totals.update({})  # the entry was deleted
    assert rows() == {"/a": 15}
    totals.update({exited(101): [3]})  # a short-lived process nobody saw: kept, never lost
    assert rows() == {"/a": 15, REMOVED.cgroup: 3}


def test_both_keys_of_one_process_read_mid_move_count_once(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = process_keys(tmp_path)
    totals = CgroupTotals(keys, Names(), width=1, grace_seconds=60, forget=lambda _: None)
    totals.update({100: [10]})
    proc.stop(100)
    totals.update({100: [12], exited(100): [12]})
    assert {labels[4]: row[0] for labels, row in totals.rows()} == {"/a": 12}


def test_a_process_that_moves_leaves_its_past_counts_behind(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/before"))
    now = [0.0]
    keys = process_keys(tmp_path, clock=lambda: now[0])
    totals = CgroupTotals(keys, Names(), width=1, grace_seconds=60, forget=lambda _: None)

    def scrape(values: dict[int, list[int]]) -> dict[str, int]:
        now[0] += 15
        totals.update(values)
        return {labels[4]: row[0] for labels, row in totals.rows()}

    assert scrape({100: [10]}) == {"/before": 10}
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup("/after"))  # e.g. joined a container's cgroups
    assert scrape({100: [25]}) == {"/before": 10, "/after": 15}
    assert scrape({100: [40]}) == {"/before": 10, "/after": 30}
    proc.stop(100)
    assert scrape({exited(100): [41]}) == {"/before": 10, "/after": 31}


def test_announced_again_after_joining_its_cgroup_counts_there(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/parent"))
    keys = process_keys(tmp_path)
    keys.announce(100, 50_000_000_000)  # one program saw it first, before it joined its cgroup
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup("/own"))
    keys.announce(100, 50_001_000_000)  # the other program's first event, after
    proc.stop(100)
    assert keys.place([exited(100)])[exited(100)].path == "/own"


class Names:
    def get(self, container_id: str) -> None:
        return None
