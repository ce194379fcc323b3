"""Thread-pool libraries from /proc/PID/maps of real processes (tests/unit/fixtures/proc-diagnosis)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy
import pytest
from threadpoolctl import threadpool_info

from agent.diagnosis.inputs.processes.libraries import (
    Library,
    libraries_in,
    mapped_files,
    read_rodata,
    version_from_name,
)
from agent.diagnosis.pools import IMPLEMENTATIONS, implementation_of
from agent.machine.procfs import ProcFS
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "proc-diagnosis"


def libraries_of(case: str, pid: int) -> list[Library]:
    procfs = ProcFS(FIXTURES / case)
    maps = procfs.read_text(pid, "maps")
    assert maps is not None
    return libraries_in(procfs, pid, maps)


def truth(case: str) -> dict[str, object]:
    report: dict[str, object] = json.loads((FIXTURES / case / "workload.json").read_text())
    return report


def test_numpy126_pool_maps_openblas_0_3_23_named_in_the_file_name() -> None:
    """Cross-checked with threadpoolctl: each worker of the captured pool ran threadpool_info() (workload.json),
    and `python -m threadpoolctl -i numpy` in that venv said openblas 0.3.23.dev at the same path."""
    workers = truth("numpy126")["workers"]
    assert isinstance(workers, dict)
    assert sorted(workers) == ["27223", "27224"]
    for pid, report in workers.items():
        (blas,) = report["blas"]
        assert libraries_of("numpy126", int(pid)) == [
            Library("blas", "openblas", blas["filepath"], blas["version"], "file name")
        ]
        assert blas["version"] == "0.3.23.dev"
    # The parent imported numpy before forking: the same library, once, though mapped in nine segments.
    maps = ProcFS(FIXTURES / "numpy126").read_text(27200, "maps") or ""
    assert maps.count("libopenblas64_p-r0-0cf96a72.3.23.dev.so") == 9
    (library,) = libraries_of("numpy126", 27200)
    assert library.path.endswith("/numpy.libs/libopenblas64_p-r0-0cf96a72.3.23.dev.so")
    assert library.version == "0.3.23.dev"


def test_numpy2_names_no_version_and_a_fixture_has_no_file_to_read_it_from() -> None:
    (blas,) = truth("numpy2")["workers"]["27634"]["blas"]  # type: ignore[index]
    assert libraries_of("numpy2", 27634) == [Library("blas", "openblas", blas["filepath"], None, "unknown")]


def test_numpy2_version_comes_from_the_files_rodata_as_threadpoolctl_says() -> None:
    """The numpy 2.x of the project's venv: its OpenBLAS file name has only a hash; .rodata says the version."""
    (info,) = [entry for entry in threadpool_info() if entry["internal_api"] == "openblas"]
    path = Path(info["filepath"])
    assert path.parent.name == "numpy.libs", path
    with open(path, "rb") as file:
        rodata = read_rodata(file)
    assert rodata is not None
    assert len(rodata) < 1024 * 1024  # the whole section, much smaller than the 25 MB file
    assert f"OpenBLAS {info['version']}".encode() in rodata


def test_version_from_contents_is_read_through_map_files(tmp_path: Path) -> None:
    """A maps line naming numpy 2.x's OpenBLAS, read through PID/map_files/RANGE (here a symlink to the file of the
    project's venv, as the kernel's entry leads to it): the version is read from the file, and told as such."""
    (info,) = [entry for entry in threadpool_info() if entry["internal_api"] == "openblas"]
    (tmp_path / "42" / "map_files").mkdir(parents=True)
    os.symlink(info["filepath"], tmp_path / "42" / "map_files" / "7f0000000000-7f0000100000")
    maps = f"7f0000000000-7f0000100000 r-xp 00000000 fd:01 1234 {info['filepath']}\n"
    versions: dict[tuple[int, int, int], str | None] = {}
    found = libraries_in(ProcFS(tmp_path), 42, maps, versions)
    assert found == [Library("blas", "openblas", info["filepath"], info["version"], "file contents")]
    assert list(versions.values()) == [info["version"]]
    assert numpy.__version__.startswith("2.")


def test_libgomp_program_maps_gnu_openmp_with_its_soname_version() -> None:
    assert libraries_of("libgomp", 29530) == [
        Library("openmp", "gnu", "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0", "1.0.0", "file name")
    ]


def test_a_plain_process_maps_no_thread_pool() -> None:
    assert libraries_of("plain", 30706) == []


@pytest.mark.parametrize(
    ("basename", "implementation", "version"),
    [
        ("libopenblasp-r0.3.21.so", "openblas", "0.3.21"),  # Debian's openblas-pthread
        ("libopenblas_haswellp-r0.2.20.so", "openblas", "0.2.20"),  # an OpenBLAS built for one CPU family
        ("libopenblas64_p-r0-0cf96a72.3.23.dev.so", "openblas", "0.3.23.dev"),  # numpy 1.26.4's wheel
        ("libscipy_openblas64_-32a4b2a6.so", "openblas", None),  # numpy 2.x's wheel
        ("libgomp-a34b3233.so.1.0.0", "gnu", "1.0.0"),  # libgomp as wheels vendor it
        ("libgomp.so.1", "gnu", "1"),
        ("libomp.so.5", "llvm", "5"),
        ("libiomp5.so", "intel", None),
        ("libmkl_rt.so.2", "mkl", "2"),
        ("libtbb.so.12", "tbb", "12"),
        ("libtorch_cpu.so", "torch", None),
        ("LIBGOMP.SO.1", "gnu", "1"),
    ],
)
def test_known_file_names(basename: str, implementation: str, version: str | None) -> None:
    kind = implementation_of(basename)
    assert kind is not None
    assert kind.implementation == implementation
    assert version_from_name(kind, basename) == version


@pytest.mark.parametrize(
    "basename", ["libtbbmalloc.so.2", "libgompx.so.1", "libgfortran-040039e1.so.5.0.0", "libc.so.6", "libomp"]
)
def test_other_files_are_not_thread_pools(basename: str) -> None:
    assert implementation_of(basename) is None


def test_every_api_of_the_issue_is_in_the_table() -> None:
    assert {kind.api for kind in IMPLEMENTATIONS if kind.prefixes} == {"blas", "openmp", "tbb", "torch"}


def test_mapped_files_skip_anonymous_mappings_dedupe_and_drop_deleted() -> None:
    maps = (
        "55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 10 /usr/bin/prog\n"
        "55d0c0a01000-55d0c0a02000 r-xp 00001000 fd:01 10 /usr/bin/prog\n"
        "7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"
        "7f0000001000-7f0000002000 rw-p 00000000 00:00 0 [heap]\n"
        "7f0000002000-7f0000003000 r-xp 00000000 fd:01 11 /opt/my libs/libgomp.so.1 (deleted)\n"
        "7f0000003000-7f0000004000 rw-s 00000000 00:01 12 /dev/shm/x\n"
    )
    assert mapped_files(maps) == {
        "/usr/bin/prog": "55d0c0a00000-55d0c0a01000",
        "/opt/my libs/libgomp.so.1": "7f0000002000-7f0000003000",
        "/dev/shm/x": "7f0000003000-7f0000004000",
    }


def test_a_fifo_in_place_of_a_library_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "42" / "map_files").mkdir(parents=True)
    os.mkfifo(tmp_path / "42" / "map_files" / "7f0000000000-7f0000100000")
    maps = "7f0000000000-7f0000100000 r-xp 00000000 fd:01 1234 /usr/lib/libscipy_openblas64_-deadbeef.so\n"
    (library,) = libraries_in(ProcFS(tmp_path), 42, maps)
    assert (library.version, library.version_source) == (None, "unknown")


def test_a_file_that_is_not_elf_has_no_rodata(tmp_path: Path) -> None:
    path = tmp_path / "libopenblas.so"
    path.write_bytes(b"OpenBLAS 0.3.99 " * 10)
    with open(path, "rb") as file:
        assert read_rodata(file) is None
