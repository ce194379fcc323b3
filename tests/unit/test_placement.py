"""Kernel keys -> places: cgroup ids, and processes placed by /proc/PID/cgroup (hosts without cgroup2)."""

from __future__ import annotations

from pathlib import Path

from agent.cgroups import CgroupLayout
from agent.collectors.common import CgroupTotals
from agent.placement import EXITED_KEY_FLAG, ProcessKeys
from agent.workloads import REMOVED

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


def exited(pid: int, stamp: int = 7) -> int:
    """The key the kernel moves a dead process's entry to (stamp: its exit time in microseconds)."""
    return EXITED_KEY_FLAG | stamp << 32 | pid


def test_v1_host_places_a_process_by_systemds_hierarchy_first(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/system.slice", systemd="/system.slice/cron.service"), comm="a) b (c")
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    placement = keys.place([100])[100]
    assert placement.path == "/system.slice/cron.service"
    assert placement.source == (100, 5000) and not placement.final


def test_hybrid_host_uses_the_cgroup2_line(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 1, (FIXTURES / "podman-cgroupfs-hybrid.txt").read_text())
    path = ProcessKeys(HYBRID, 100, tmp_path).place([100])[100].path
    assert path is not None and path.startswith("/libpod_parent/libpod-")


def test_real_v1_lines_of_a_kubelet_pod(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 1, (FIXTURES / "containerd-cri-kubepods-burstable-hybrid.txt").read_text())
    path = ProcessKeys(V1_ONLY, 100, tmp_path).place([100])[100].path
    assert path is not None and path.startswith("/kubepods/burstable/pod")


def test_exited_key_is_placed_where_the_process_lived_and_is_final(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    live = keys.place([100])[100]
    proc.stop(100)
    gone = keys.place([exited(100)])[exited(100)]
    assert (gone.source, gone.path, gone.final) == (live.source, "/a", True)
    keys.forget([exited(100)])
    assert len(keys) == 0


def test_reused_pid_is_a_new_process_in_its_own_place(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    keys.place([100])
    proc.stop(100)
    proc.start(100, 9000, v1_cgroup("/b"))  # same pid, later start: another process
    places = keys.place([exited(100), 100])
    assert (places[exited(100)].path, places[exited(100)].source) == ("/a", (100, 5000))
    assert (places[100].path, places[100].source, places[100].final) == ("/b", (100, 9000), False)
    keys.forget([exited(100)])
    assert keys.place([100])[100].path == "/b"


def test_announced_process_is_placed_even_if_it_exits_before_the_scrape(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/short"))
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    keys.announce(100)
    proc.stop(100)
    assert keys.place([exited(100)])[exited(100)].path == "/short"


def test_process_gone_before_it_was_read_is_unplaced_not_misplaced(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    keys.announce(100)  # already gone: its turn is kept, unplaced
    proc.start(100, 9000, v1_cgroup("/b"))  # the pid is reused at once
    places = keys.place([exited(100), 100])
    assert places[exited(100)].path is None and places[exited(100)].final
    assert places[100].path == "/b"


def test_totals_follow_a_process_from_live_to_exited_key_without_double_counting(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
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
    totals.update({exited(100, 8): [3]})  # a short-lived process nobody saw: kept, never lost
    assert rows() == {"/a": 15, REMOVED.cgroup: 3}


def test_both_keys_of_one_process_read_mid_move_count_once(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    totals = CgroupTotals(keys, Names(), width=1, grace_seconds=60, forget=lambda _: None)
    totals.update({100: [10]})
    proc.stop(100)
    totals.update({100: [12], exited(100): [12]})
    assert {labels[4]: row[0] for labels, row in totals.rows()} == {"/a": 12}


class Names:
    def get(self, container_id: str) -> None:
        return None


def test_a_process_that_moves_leaves_its_past_counts_behind(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/before"))
    keys = ProcessKeys(V1_ONLY, 100, tmp_path, clock=iter(range(0, 1000, 10)).__next__)
    totals = CgroupTotals(keys, Names(), width=1, grace_seconds=60, forget=lambda _: None)
    totals.update({100: [10]})
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup("/after"))  # e.g. joined a container's cgroups
    totals.update({100: [25]})
    assert {labels[4]: row[0] for labels, row in totals.rows()} == {"/before": 10, "/after": 15}
    totals.update({100: [40]})
    assert {labels[4]: row[0] for labels, row in totals.rows()} == {"/before": 10, "/after": 30}
    proc.stop(100)
    totals.update({exited(100): [41]})
    assert {labels[4]: row[0] for labels, row in totals.rows()} == {"/before": 10, "/after": 31}


def test_announced_again_after_joining_its_cgroup_counts_there(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/parent"))
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    keys.announce(100)  # one program saw it first, before it joined its cgroup
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup("/own"))
    keys.announce(100)  # the other program's first event, after
    proc.stop(100)
    assert keys.place([exited(100)])[exited(100)].path == "/own"


def test_two_processes_that_had_one_pid_between_scrapes_are_told_apart_by_exit_time(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    for start, path in ((5000, "/first"), (6000, "/second")):
        proc.start(100, start, v1_cgroup(path))
        keys.announce(100)
        proc.stop(100)
    late, early = exited(100, stamp=900), exited(100, stamp=800)
    places = keys.place([late, early])
    assert (places[early].path, places[late].path) == ("/first", "/second")
    # The microsecond clock wrapped between the two exits.
    wrapped_late, wrapped_early = exited(100, stamp=5), exited(100, stamp=(1 << 31) - 5)
    places = keys.place([wrapped_late, wrapped_early])
    assert (places[wrapped_early].path, places[wrapped_late].path) == ("/first", "/second")


def test_forgetting_a_process_read_mid_move_drops_it_once(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    keys = ProcessKeys(V1_ONLY, 100, tmp_path)
    proc.start(100, 5000, v1_cgroup("/old"))
    keys.announce(100)
    proc.stop(100)
    proc.start(100, 6000, v1_cgroup("/new"))  # the pid is already someone else's
    keys.announce(100)
    keys.place([100, exited(100)])
    keys.forget([exited(100)])
    assert keys.place([100])[100].path == "/new" and len(keys) == 1
