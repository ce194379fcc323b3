"""Cgroup files kept open between scrapes (agent/machine/held_files.py) against the real cgroup2 tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agent.machine.held_files import HeldFiles
from tests.support.workloads import CgroupSandbox


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_held_cgroup_file_reads_afresh_and_never_outlives_its_cgroup(cgroups: CgroupSandbox) -> None:
    files = HeldFiles(8, [str(cgroups.root)])
    group = cgroups.make("held")
    path = f"{group}/cgroup.procs"
    assert files.read(path) == "" and len(files) == 1, "held after the first read"
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (group / "cgroup.procs").write_text(str(sleeper.pid))
        assert files.read(path) == f"{sleeper.pid}\n", "read again from the start, as the kernel writes it now"
    finally:
        sleeper.kill()
        sleeper.wait()
    cgroups.remove(group)  # not kept from removal by the open descriptor
    assert files.read(path) is None and len(files) == 0, "gone: closed, and nothing read"
    group.mkdir()
    assert files.read(path) == "" and len(files) == 1, "a cgroup made again under the name is read afresh"
    files.end_round()
    assert len(files) == 1, "read this round: kept"
    files.end_round()
    assert len(files) == 0, "not read for a round: closed"
    group.rmdir()


def test_held_files_are_bounded_and_only_cgroup_files_are_held(cgroups: CgroupSandbox, tmp_path: Path) -> None:
    groups = [cgroups.make(f"bound{index}") for index in range(5)]
    files = HeldFiles(3, [str(cgroups.root), str(tmp_path)])
    before = open_descriptors()
    assert all(files.read(f"{group}/cgroup.procs") == "" for group in groups)
    assert len(files) == 3 and open_descriptors() == before + 3
    plain = tmp_path / "plain"
    plain.write_text("1\n")
    other = HeldFiles(3, [str(tmp_path)])
    assert other.read(str(plain)) == "1\n" and len(other) == 0, "a file outside cgroupfs is never held"
    files.close()
    assert open_descriptors() == before


def test_out_of_descriptors_it_holds_fewer_and_still_reads(cgroups: CgroupSandbox) -> None:
    import resource

    groups = [cgroups.make(f"scarce{index}") for index in range(6)]
    files = HeldFiles(100, [str(cgroups.root)])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        assert all(files.read(f"{group}/cgroup.procs") == "" for group in groups[:4]) and len(files) == 4
        lowest_free = os.dup(0)
        os.close(lowest_free)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free + 1, hard))  # descriptors are numbered below it
        spare = os.open("/dev/null", os.O_RDONLY)  # takes the last number: none is left
        try:
            assert files.read(f"{groups[4]}/cgroup.procs") == "", "read with a descriptor given back"
            assert files.limit == 2 and len(files) <= 2
        finally:
            os.close(spare)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        files.close()


def test_a_held_file_longer_than_a_page_is_read_whole(cgroups: CgroupSandbox) -> None:
    """A kernel seq file gives about a page per read: cgroup.threads of 1,000 threads is ~6 KB."""
    from tests.support.workloads import Workload, build

    group = cgroups.make("many-threads")
    workload = Workload(build("threader"), group, 1_000, 1)
    try:
        whole = (group / "cgroup.threads").read_text()
        assert len(whole.split()) == 1_001 and len(whole) > 4096
        files = HeldFiles(8, [str(cgroups.root)])
        assert files.read(f"{group}/cgroup.threads") == whole and len(files) == 1
        assert files.read(f"{group}/cgroup.threads") == whole, "read again through the held descriptor"
        files.close()
    finally:
        workload.release()
