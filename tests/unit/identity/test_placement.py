"""Kernel keys -> places: cgroup ids, and processes placed by /proc/PID/cgroup (hosts without cgroup2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.collectors.common.totals import CgroupTotals
from agent.identity.placement import EXIT_SPAN, EXITED_KEY_FLAG, CgroupKeys, ProcessKeys
from agent.identity.workload import REMOVED
from agent.machine.cgroups.layout import CgroupLayout, parse_hierarchy_ids
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.procfs import ProcFS
from tests.unit.locations import UNIT_FIXTURES

V1_ONLY = CgroupLayout(unified=None, v1={"cpu": Path("/c"), "name=systemd": Path("/s"), "memory": Path("/m")})
HYBRID = CgroupLayout(unified=Path("/u"), v1={"cpu": Path("/c")})
FIXTURES = UNIT_FIXTURES / "proc-cgroup"


class FakeProc:
    """A /proc with the processes a test starts and stops."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "self").mkdir(parents=True)
        (root / "self" / "stat").write_text("1 (x) S")

    def start(self, pid: int, start_ticks: int, cgroup_text: str, comm: str = "worker (1)") -> None:
        directory = self.root / str(pid)
        directory.mkdir(exist_ok=True)
        after_comm = ["S", *["0"] * 18, str(start_ticks), *["0"] * 30]  # fields 3..52; 22: start
        (directory / "stat").write_text(f"{pid} ({comm}) {' '.join(after_comm)}\n")
        (directory / "cgroup").write_text(cgroup_text)

    def begin_exit(self, pid: int) -> None:
        """do_exit() has begun: PF_EXITING in the flags, and every v1 line of /proc/PID/cgroup says "/"."""
        stat = self.root / str(pid) / "stat"
        head, _, tail = stat.read_text().rpartition(") ")
        fields = tail.split()
        fields[6] = str(0x400104)  # PF_EXITING | PF_FORKNOEXEC | PF_RANDOMIZE
        stat.write_text(f"{head}) {' '.join(fields)}\n")
        cgroup = self.root / str(pid) / "cgroup"
        lines = [
            line.rsplit(":", 1)[0] + (":/" if line.split(":")[1] else ":" + line.rsplit(":", 1)[1])
            for line in cgroup.read_text().splitlines()
        ]
        cgroup.write_text("\n".join(lines) + "\n")

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


def gone_process_announced_in_a(tmp_path: Path) -> tuple[FakeProc, ProcessKeys]:
    """Process A (pid 100, forked at 50 s, announced in /a at 50.0002 s) has exited; the next may take its pid."""
    proc = FakeProc(tmp_path)
    keys = process_keys(tmp_path, initial_cgroup_namespace=True)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys.announce(100, 50_000_200_000, parent=1, forked_ns=50_000_000_000)
    proc.stop(100)
    return proc, keys


def test_an_announcement_read_after_its_pid_was_reused_is_not_the_new_process(tmp_path: Path) -> None:
    # A (forked at 50.000 s) is announced by one program, lives, and exits at 50.3015 s; B gets its pid 0.5 ms
    # later, in the clock tick A exited in. The other program's announcement of A (its key was made as A exited)
    # is read only now, while B runs.
    proc, keys = gone_process_announced_in_a(tmp_path)
    proc.start(100, 5030, v1_cgroup("/b"))
    keys.announce(100, 50_301_400_000, parent=1, forked_ns=50_000_001_000)
    places = keys.place([exited(100, 50.3015), 100])
    assert (places[exited(100, 50.3015)].path, places[exited(100, 50.3015)].source) == ("/a", (100, 50_000_000))
    assert (places[100].path, places[100].source) == ("/b", (100, 50_300_000))
    # B's own announcement, with its own fork time, is B.
    keys.announce(100, 50_302_000_000, parent=1, forked_ns=50_301_900_000)
    assert keys.place([100])[100].path == "/b"
    proc.stop(100)
    assert keys.place([exited(100, 50.4)])[exited(100, 50.4)].path == "/b"


@pytest.mark.parametrize(
    ("path", "moved_ns", "places"),
    [
        (b"/b", 50_302_000_000, ("/a", "/b")),  # B's own move into /b, read before B's announcement
        (b"/a2", 50_200_000_000, ("/a2", "/b")),  # A's move before it exited, read only once B had the pid
    ],
)
def test_a_move_read_after_the_pid_was_reused_goes_to_the_process_that_held_it_then(
    tmp_path: Path, path: bytes, moved_ns: int, places: tuple[str, str]
) -> None:
    proc, keys = gone_process_announced_in_a(tmp_path)  # A exited at 50.3015 s
    proc.start(100, 5030, v1_cgroup("/b"))  # B, from 50.30 s
    keys.moved(100, path, boot_ns=moved_ns)
    placed = keys.place([exited(100, 50.3015), 100])
    assert (placed[exited(100, 50.3015)].path, placed[100].path) == places


def test_an_announcement_names_its_process_by_fork_time_even_after_a_third_took_the_pid(tmp_path: Path) -> None:
    # B's move is read before B's announcement; B exits and C takes the pid; then B's announcement is read.
    proc, keys = gone_process_announced_in_a(tmp_path)
    proc.start(100, 5030, v1_cgroup("/job"))
    keys.moved(100, b"/job", boot_ns=50_310_000_000)
    proc.stop(100)
    proc.start(100, 5050, v1_cgroup("/c"))
    keys.announce(100, 50_320_000_000, parent=1, forked_ns=50_300_100_000)
    places = keys.place([exited(100, 50.2), exited(100, 50.45), 100])
    assert [places[key].path for key in (exited(100, 50.2), exited(100, 50.45), 100)] == ["/a", "/job", "/c"]


def test_a_process_read_only_from_proc_that_exits_within_its_start_tick_is_placed(tmp_path: Path) -> None:
    # No earlier process had the pid, and its announcement was lost: /proc's start tick is all there is.
    proc = FakeProc(tmp_path)
    keys = process_keys(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    keys.place([100])
    proc.stop(100)
    assert keys.place([exited(100, 50.004)])[exited(100, 50.004)].path == "/a"


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


def process_in_a(tmp_path: Path) -> tuple[FakeProc, CgroupTotals, list[int]]:
    """Process 100 running in cgroup /a, totals keyed by process, and the keys they free."""
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/a"))
    freed: list[int] = []
    totals = CgroupTotals(process_keys(tmp_path), Names(), width=1, grace_seconds=60, forget=freed.extend)
    return proc, totals, freed


def test_totals_follow_a_process_from_live_to_exited_key_without_double_counting(tmp_path: Path) -> None:
    proc, totals, freed = process_in_a(tmp_path)

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


def test_an_entry_made_again_after_its_cgroup_was_removed_counts_where_it_was_counted(tmp_path: Path) -> None:
    """A task's last scheduler event runs after it left its cgroup: the sched program can make the removed cgroup's
    entry again after the agent deleted it. Within the grace period its time belongs to the workload it came from,
    not to (removed); after it, to (removed)."""
    root = tmp_path / "cgroup2"
    (root / "job").mkdir(parents=True)
    (root / "cgroup.procs").touch()  # what makes a directory tree a visible cgroup2 root
    job = (root / "job").stat().st_ino
    now = [0.0]
    freed: list[int] = []
    resolver = CgroupPathResolver(root, clock=lambda: now[0])
    totals = CgroupTotals(CgroupKeys(resolver), Names(), 1, 60, freed.extend, clock=lambda: now[0])

    def scrape(values: dict[int, list[int]]) -> dict[str, int]:
        now[0] += 15
        totals.update(values)
        return {labels[4]: row[0] for labels, row in totals.rows()}

    assert scrape({job: [10]}) == {"/job": 10}
    (root / "job").rmdir()
    assert scrape({job: [12]}) == {"/job": 12}  # found gone: its last value, and the entry is deleted
    assert freed == [job]
    assert scrape({}) == {"/job": 12}
    assert scrape({job: [3]}) == {"/job": 15}  # made again by the exiting task's last switch, deleted again
    assert freed == [job, job]
    assert scrape({}) == {"/job": 15}
    now[0] += 60  # the grace period ends: the series goes, and what comes later is (removed)
    assert scrape({}) == {}
    assert scrape({job: [2]}) == {REMOVED.cgroup: 2}


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


def test_a_child_gone_before_it_was_read_is_placed_where_its_parent_is(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(200, 4000, v1_cgroup("/batch"))  # the shell that forked it
    keys = process_keys(tmp_path)
    keys.announce(100, 50_000_000_000, parent=200)  # the child: already gone when its announcement is read
    assert keys.place([exited(100)])[exited(100)].path == "/batch"


def test_a_process_that_moved_and_died_unread_is_placed_where_it_moved(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(200, 4000, v1_cgroup("/shell"))
    keys = process_keys(tmp_path, initial_cgroup_namespace=True)
    # The move came in on one program's ring before the other program announced the process.
    keys.moved(100, b"/system.slice/job.scope")
    keys.announce(100, 50_000_000_000, parent=200)
    assert keys.place([exited(100)])[exited(100)].path == "/system.slice/job.scope"


def test_a_move_heard_while_the_process_lives_places_its_exit_without_a_read(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/parent"))
    keys = process_keys(tmp_path, initial_cgroup_namespace=True)
    keys.announce(100, 50_000_000_000)  # read before it joined its cgroup
    keys.moved(100, b"/own")
    proc.stop(100)  # and gone before any scrape
    keys.announce(100, 50_002_000_000)  # the other program's announcement, read after it died
    assert keys.place([exited(100)])[exited(100)].path == "/own"


def test_both_programs_announcing_a_process_that_died_unread_make_one_process(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(200, 4000, v1_cgroup("/shell"))
    keys = process_keys(tmp_path, initial_cgroup_namespace=True)
    keys.moved(100, b"/job")  # heard first from one program's ring
    keys.announce(100, 50_000_000_000, parent=200)  # the other program's announcement: gone already
    keys.announce(100, 50_000_300_000, parent=200)  # the first program's own announcement, read later still
    assert len(keys) == 1  # the child, once
    assert keys.place([exited(100, 50.5)])[exited(100, 50.5)].path == "/job"


def test_a_pid_announced_again_long_after_its_unread_process_is_another_process(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(200, 4000, v1_cgroup("/first"))
    keys = process_keys(tmp_path)
    keys.announce(100, 50_000_000_000, parent=200)
    (tmp_path / "200" / "cgroup").write_text(v1_cgroup("/second"))
    keys.announce(100, 80_000_000_000, parent=200)  # 30 s later: the pid came back
    places = keys.place([exited(100, 50.1), exited(100, 80.1)])
    assert (places[exited(100, 50.1)].path, places[exited(100, 80.1)].path) == ("/first", "/second")


def test_a_process_read_while_exiting_keeps_its_place(tmp_path: Path) -> None:
    # Each program announces a key again if the dying task is switched out after its exit moved the entry.
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/own"))
    keys = process_keys(tmp_path)
    keys.announce(100, 50_000_000_000)
    proc.begin_exit(100)
    assert (tmp_path / "100" / "cgroup").read_text() == "5:memory:/\n3:cpu,cpuacct:/\n1:name=systemd:/\n0::/\n"
    keys.announce(100, 50_002_000_000)
    assert keys.place([exited(100)])[exited(100)].path == "/own"


def test_a_process_first_read_while_exiting_is_placed_where_its_parent_is(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(200, 4000, v1_cgroup("/batch"))
    proc.start(100, 5000, v1_cgroup("/batch"))
    proc.begin_exit(100)
    keys = process_keys(tmp_path)
    keys.announce(100, 50_000_000_000, parent=200)
    assert keys.place([exited(100)])[exited(100)].path == "/batch"


def test_a_process_in_the_v1_root_is_placed_there(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/"))
    assert process_keys(tmp_path).place([100])[100].path == "/"


def test_a_move_whose_path_did_not_fit_is_read_from_proc(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/parent"))
    keys = process_keys(tmp_path, initial_cgroup_namespace=True)
    keys.announce(100, 50_000_000_000)
    long_path = "/" + "x" * 300
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup(long_path))
    keys.moved(100, None)
    proc.stop(100)
    assert keys.place([exited(100)])[exited(100)].path == long_path


def test_in_a_private_cgroup_namespace_moves_are_read_from_proc_not_taken_from_the_kernel(tmp_path: Path) -> None:
    # The kernel names cgroups from the host's root; /proc/PID/cgroup from the agent's namespace root.
    proc = FakeProc(tmp_path)
    proc.start(100, 5000, v1_cgroup("/parent"))
    keys = process_keys(tmp_path, initial_cgroup_namespace=False)
    keys.announce(100, 50_000_000_000)
    (tmp_path / "100" / "cgroup").write_text(v1_cgroup("/own"))
    keys.moved(100, b"/kubepods/pod1/own")
    proc.stop(100)
    assert keys.place([exited(100)])[exited(100)].path == "/own"


def test_the_placing_hierarchy_id_is_the_one_its_paths_come_from(tmp_path: Path) -> None:
    FakeProc(tmp_path)
    (tmp_path / "self" / "cgroup").write_text(v1_cgroup("/"))
    assert process_keys(tmp_path).place_hierarchy == 1  # name=systemd on a v1-only host
    assert process_keys(tmp_path, HYBRID).place_hierarchy == 0  # the cgroup2 line


class Names:
    def get(self, container_id: str) -> None:
        return None


def test_hierarchy_ids_of_a_real_centos7_process() -> None:
    ids = parse_hierarchy_ids((FIXTURES / "centos7-v1-system-slice.txt").read_text())
    assert ids["name=systemd"] == 1 and ids["cpu"] == ids["cpuacct"] == 11 and ids["memory"] == 6
    assert "" not in ids  # no cgroup2 line on CentOS 7
    hybrid = parse_hierarchy_ids((FIXTURES / "podman-cgroupfs-hybrid.txt").read_text())
    assert hybrid[""] == 0


def test_a_final_key_is_read_again_so_counts_made_after_the_maps_read_are_kept(tmp_path: Path) -> None:
    proc, totals, freed = process_in_a(tmp_path)
    asked: list[list[int]] = []

    def read_again(final: list[int]) -> dict[int, list[int]]:
        asked.append(final)
        return {exited(100): [20]}  # it counted on after the map was read, then exited

    totals.update({100: [10]}, read_again)
    assert asked == [], "nothing final: nothing read again"
    proc.stop(100)
    totals.update({exited(100): [15]}, read_again)
    assert asked == [[exited(100)]]
    assert {labels[4]: row[0] for labels, row in totals.rows()} == {"/a": 20}, "its last value, not the one read"
    assert freed == [exited(100)]
