"""cgroup layout from mountinfo fixtures, and id -> path resolution on a real directory tree."""

from __future__ import annotations

import os
from pathlib import Path

from agent.machine.cgroups.layout import UNIFIED, CgroupLayout, Hierarchy, layout_under, parse_mountinfo, read_layout
from agent.machine.cgroups.paths import CgroupPathResolver
from tests.unit.locations import UNIT_FIXTURES


def test_hybrid_layout_of_the_development_vm() -> None:
    layout = parse_mountinfo((UNIT_FIXTURES / "mountinfo-hybrid-firecracker.txt").read_text())
    assert layout.mode == "hybrid"
    assert layout.unified == Path("/sys/fs/cgroup/unified")
    assert layout.v1["cpu"] == Path("/sys/fs/cgroup/cpu")
    assert layout.v1["cpuset"] == Path("/sys/fs/cgroup/cpuset")
    assert "name=systemd" in layout.v1


def test_unified_layout_of_a_systemd_host() -> None:
    layout = parse_mountinfo((UNIT_FIXTURES / "mountinfo-v2-systemd.txt").read_text())
    assert layout.mode == "v2"
    assert layout.unified == Path("/sys/fs/cgroup")
    assert layout.v1 == {}


def make_cgroup_tree(root: Path) -> dict[str, int]:
    for relative in ("a", "a/b", "c"):
        (root / relative).mkdir(parents=True)
    (root / "cgroup.procs").write_text("")
    return {relative: os.stat(root / relative).st_ino for relative in ("a", "a/b", "c")}


def test_resolver_maps_inodes_to_paths_and_notices_removal(tmp_path: Path) -> None:
    inodes = make_cgroup_tree(tmp_path)
    resolver = CgroupPathResolver(tmp_path)
    root_inode = os.stat(tmp_path).st_ino
    assert resolver.resolve([inodes["a/b"], inodes["c"], root_inode]) == {
        inodes["a/b"]: "/a/b",
        inodes["c"]: "/c",
        root_inode: "/",
    }
    (tmp_path / "a/b").rmdir()
    (tmp_path / "a/d").mkdir()
    new = os.stat(tmp_path / "a/d").st_ino
    resolved = resolver.resolve([inodes["a/b"], new])
    assert resolved[new] == "/a/d"
    if new != inodes["a/b"]:  # a filesystem may hand the inode out again; cgroupfs never does
        assert resolved[inodes["a/b"]] is None


class Clock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_scrape_round_checks_each_id_once_and_walks_only_when_the_tree_changed(tmp_path: Path) -> None:
    inodes = make_cgroup_tree(tmp_path)
    (tmp_path / "cgroup.stat").write_text("nr_descendants 3\nnr_dying_descendants 0\n")
    clock = Clock()
    resolver = CgroupPathResolver(tmp_path, clock=clock)
    walks: list[int] = []
    stats: list[int] = []
    walk, still_there = resolver._walk, resolver._still_there
    resolver._walk = lambda: walks.append(1) or walk()  # type: ignore[method-assign]
    resolver._still_there = lambda cgroup_id: stats.append(1) or still_there(cgroup_id)  # type: ignore[method-assign]
    ids = [inodes["a/b"], inodes["c"]]

    resolver.begin_round()
    assert resolver.resolve(ids) == {inodes["a/b"]: "/a/b", inodes["c"]: "/c"} and len(walks) == 1, "unknown: walk"
    assert resolver.resolve(ids) and resolver.snapshot(this_round=True)[inodes["a"]] == "/a" and len(walks) == 1

    resolver.begin_round()
    stats.clear()
    assert resolver.resolve(ids)[inodes["c"]] == "/c" and stats == [], "the same count: the walk stands"
    assert resolver.snapshot(this_round=True)[inodes["a"]] == "/a" and len(walks) == 1, "same count: no walk"

    (tmp_path / "cgroup.stat").write_text("nr_descendants 9\nnr_dying_descendants 0\n")  # a change elsewhere
    resolver.begin_round()
    assert resolver.resolve(ids)[inodes["c"]] == "/c" and len(stats) == 2, "known ids: a stat each"
    assert resolver.resolve(ids)[inodes["c"]] == "/c" and len(stats) == 2, "checked once per round"
    resolver.snapshot(this_round=True)
    assert len(walks) == 2, "the count moved: walked"

    (tmp_path / "d").mkdir()
    (tmp_path / "cgroup.stat").write_text("nr_descendants 4\nnr_dying_descendants 0\n")
    resolver.begin_round()
    assert resolver.snapshot(this_round=True)[os.stat(tmp_path / "d").st_ino] == "/d" and len(walks) == 3

    (tmp_path / "a/b").rmdir()
    (tmp_path / "cgroup.stat").write_text("nr_descendants 3\nnr_dying_descendants 1\n")
    resolver.begin_round()
    assert resolver.resolve([inodes["a/b"]]) == {inodes["a/b"]: None} and len(walks) == 4, "gone: a walk says so"

    resolver.begin_round()
    clock.now += CgroupPathResolver.REWALK_SECONDS
    resolver.snapshot(this_round=True)
    assert len(walks) == 5, "walked again when the last walk is old, whatever the count"
    resolver.snapshot()
    assert len(walks) == 6, "a snapshot not for a round always walks"


def test_resolver_without_a_cgroup2_tree_is_unhealthy(tmp_path: Path) -> None:
    resolver = CgroupPathResolver(tmp_path / "missing")
    assert not resolver.healthy
    assert resolver.resolve([1]) == {1: None}
    assert not CgroupPathResolver(None).healthy


def test_layout_under_a_hybrid_host_mount(tmp_path: Path) -> None:
    for hierarchy in ("cpu,cpuacct", "cpuset", "systemd"):
        (tmp_path / hierarchy).mkdir()
        (tmp_path / hierarchy / "tasks").write_text("")
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.controllers").write_text("")
    layout = layout_under(tmp_path)
    assert layout.mode == "hybrid"
    assert layout.unified == tmp_path / "unified"
    assert layout.v1 == {
        "cpu": tmp_path / "cpu,cpuacct",
        "cpuacct": tmp_path / "cpu,cpuacct",
        "cpuset": tmp_path / "cpuset",
        "name=systemd": tmp_path / "systemd",
    }


def test_layout_under_a_v2_host_mount(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu io memory pids")
    (tmp_path / "system.slice").mkdir()
    layout = layout_under(tmp_path)
    assert (layout.mode, layout.unified, layout.v1) == ("v2", tmp_path, {})


def test_layout_under_this_host_root_matches_mountinfo() -> None:
    # Whatever this host is (v2 at /sys/fs/cgroup, or hybrid with unified/), reading the tree must agree with
    # what /proc/self/mountinfo says is mounted there.
    mounted = read_layout()
    seen = layout_under(Path("/sys/fs/cgroup"))
    assert seen.unified == mounted.unified
    assert seen.v1.keys() == mounted.v1.keys()
    assert all(seen.v1[c].resolve() == mounted.v1[c].resolve() for c in mounted.v1)


def test_v1_only_layout_of_the_development_vm_without_cgroup2() -> None:
    layout = parse_mountinfo((UNIT_FIXTURES / "mountinfo-v1-only-firecracker.txt").read_text())
    assert (layout.mode, layout.unified) == ("v1", None)
    assert layout.v1["cpu"] == Path("/sys/fs/cgroup/cpu")
    assert layout.v1["name=systemd"] == Path("/sys/fs/cgroup/systemd")


def test_the_workload_hierarchy_of_each_layout() -> None:
    """cgroup2 wherever it is mounted; on v1 hosts systemd's named tree (where BPF keys place processes, and the
    tree the collectors and diagnose read a workload's directories in), else the cpu controller's."""
    hybrid = parse_mountinfo((UNIT_FIXTURES / "mountinfo-hybrid-firecracker.txt").read_text())
    assert hybrid.workload_hierarchy == Hierarchy(UNIFIED, Path("/sys/fs/cgroup/unified"))
    assert hybrid.workload_hierarchy.threads_file == "cgroup.threads"
    assert hybrid.placing_order == (UNIFIED,)
    v2 = parse_mountinfo((UNIT_FIXTURES / "mountinfo-v2-systemd.txt").read_text())
    assert v2.workload_tree == Path("/sys/fs/cgroup")
    v1 = parse_mountinfo((UNIT_FIXTURES / "mountinfo-v1-only-firecracker.txt").read_text())
    assert v1.workload_hierarchy == Hierarchy("name=systemd", Path("/sys/fs/cgroup/systemd"))
    assert v1.workload_hierarchy.threads_file == "tasks"
    assert v1.placing_order[:4] == ("name=systemd", "cpu", "cpuacct", "memory")
    no_systemd = CgroupLayout(None, {name: path for name, path in v1.v1.items() if name != "name=systemd"})
    assert no_systemd.workload_hierarchy == Hierarchy("cpu", Path("/sys/fs/cgroup/cpu"))
    assert CgroupLayout(None).workload_hierarchy is None


def test_centos7_mount_options_name_no_hierarchy_but_their_own() -> None:
    layout = parse_mountinfo((UNIT_FIXTURES / "mountinfo-v1-centos7.txt").read_text())
    assert sorted(layout.v1) == ["blkio", "cpu", "cpuacct", "name=systemd", "net_cls"], "not xattr, nor the agent"
    assert layout.workload_tree == Path("/sys/fs/cgroup/systemd")


def test_layout_under_a_v1_host_mount(tmp_path: Path) -> None:
    for hierarchy in ("cpu,cpuacct", "memory", "systemd"):
        (tmp_path / hierarchy).mkdir()
        (tmp_path / hierarchy / "tasks").write_text("")
    layout = layout_under(tmp_path)
    assert (layout.mode, layout.unified) == ("v1", None)
    assert layout.v1["cpu"] == tmp_path / "cpu,cpuacct"


def test_walk_survives_a_tenant_nesting_thousands_of_levels(tmp_path: Path) -> None:
    """1,500 levels (os.fwalk recursed once per level and raised RecursionError) and 2,000 siblings: no error,
    no descriptor left open, the first MAX_WALK_DEPTH levels named, every sibling named."""
    import os

    from agent.machine.cgroups.paths import MAX_WALK_DEPTH, CgroupPathResolver

    fd = os.open(tmp_path, os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("x", dir_fd=fd)
        inner = os.open("x", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    wide = tmp_path / "wide\udcff"
    wide.mkdir()
    for index in range(2000):
        (wide / f"w{index}").mkdir()
    (tmp_path / "cgroup.procs").write_text("")  # what makes the tree look like a mounted cgroup2 root
    open_before = len(os.listdir("/proc/self/fd"))
    paths = CgroupPathResolver(tmp_path).snapshot()
    assert len(os.listdir("/proc/self/fd")) == open_before
    deep = [path for path in paths.values() if path.startswith("/x")]
    assert len(deep) == MAX_WALK_DEPTH - 1
    assert sum(1 for path in paths.values() if path.startswith("/wide\udcff/w")) == 2000
    assert paths[os.stat(tmp_path).st_ino] == "/"
    _remove_deep(tmp_path / "x")  # pytest's own clean-up recurses per level and would fail on 1,500


def _remove_deep(top: Path) -> None:
    """Remove a chain of nested empty directories of any depth, deepest first, by descriptors."""
    import os

    chain = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        while "x" in os.listdir(chain[-1]):
            chain.append(os.open("x", os.O_RDONLY | os.O_DIRECTORY, dir_fd=chain[-1]))
        for parent in reversed(chain[:-1]):
            os.rmdir("x", dir_fd=parent)
    finally:
        for fd in chain:
            os.close(fd)
    top.rmdir()
