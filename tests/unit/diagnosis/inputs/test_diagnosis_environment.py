"""The allow-listed thread variables of a process's environment, and nothing else of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.diagnosis.inputs.processes.access import Access
from agent.diagnosis.inputs.processes.environment import (
    ALLOWED,
    VALUE_LIMIT,
    ThreadEnvironment,
    parse_environ,
    read_environment,
)
from agent.diagnosis.inputs.processes.workload import process_detail, to_jsonable
from agent.machine.procfs import ProcFS
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "proc-diagnosis"
CANARY = "fixture-canary-6f1d2c"  # written into every fixture environ (see the README there)


def test_the_allow_list_is_the_issues() -> None:
    assert set(ALLOWED) == {
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "GOTO_NUM_THREADS",
        "BLIS_NUM_THREADS",  # BLIS's own: a fix may name it, so it is read back (issue 21)
        "VECLIB_MAXIMUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "OMP_WAIT_POLICY",
        "GOMP_SPINCOUNT",
        "KMP_BLOCKTIME",
        "OPENBLAS_THREAD_TIMEOUT",
        # How the allocators keep or hand back freed memory (issue 26): a fix for allocator churn says what is set.
        "MALLOC_ARENA_MAX",
        "MALLOC_MMAP_MAX_",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_TOP_PAD_",
        "GLIBC_TUNABLES",
        "MALLOC_CONF",
        "JE_MALLOC_CONF",
        "TCMALLOC_RELEASE_RATE",
        "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
        "MIMALLOC_PURGE_DELAY",
        "MIMALLOC_ARENA_EAGER_COMMIT",
    }


def test_numpy_worker_environment_values_unset_and_set_but_empty() -> None:
    environment = read_environment(ProcFS(FIXTURES / "numpy126"), 27223)
    assert environment.access is Access.READ
    assert environment.values == (("OMP_NUM_THREADS", "3"), ("OPENBLAS_THREAD_TIMEOUT", ""))
    expected = dict.fromkeys(ALLOWED, "unset")
    expected.update(OMP_NUM_THREADS="3", OPENBLAS_THREAD_TIMEOUT="")
    assert environment.as_dict() == expected


def test_libgomp_environment() -> None:
    environment = read_environment(ProcFS(FIXTURES / "libgomp"), 29530)
    assert environment.value("OMP_NUM_THREADS") == "3"
    assert environment.value("GOMP_SPINCOUNT") == "10000"
    assert environment.value("OMP_WAIT_POLICY") == "unset"


def test_other_variables_cannot_be_asked_for() -> None:
    environment = read_environment(ProcFS(FIXTURES / "plain"), 30706)
    assert environment.as_dict() == dict.fromkeys(ALLOWED, "unset")
    with pytest.raises(KeyError):
        environment.value("SCHEDWATCH_CANARY")
    with pytest.raises(KeyError):
        environment.value("HOME")


def test_a_gone_process_is_gone_not_unset(tmp_path: Path) -> None:
    environment = read_environment(ProcFS(tmp_path), 999999)
    assert environment.access is Access.GONE
    assert environment.value("OMP_NUM_THREADS") == "gone"


def test_not_permitted_is_said_for_every_variable() -> None:
    environment = ThreadEnvironment(Access.NOT_PERMITTED, ())
    assert set(environment.as_dict().values()) == {"not permitted"}


@pytest.mark.parametrize("case", ["numpy126", "numpy2", "libgomp", "plain"])
def test_the_canary_comes_out_of_nothing(case: str) -> None:
    procfs = ProcFS(FIXTURES / case)
    pid = min(procfs.pids())
    raw = procfs.read_bytes(pid, "environ")
    assert raw is not None and CANARY.encode() in raw  # the fixture holds it: the test can fail
    detail = process_detail(procfs, pid, {})
    assert CANARY not in repr(detail)
    assert CANARY not in json.dumps(to_jsonable(detail))


def test_first_entry_wins_as_getenv_finds_it() -> None:
    assert parse_environ(b"OMP_NUM_THREADS=2\0OMP_NUM_THREADS=8\0") == (("OMP_NUM_THREADS", "2"),)


def test_names_must_match_whole() -> None:
    raw = b"XOMP_NUM_THREADS=1\0OMP_NUM_THREADS_X=2\0OMP_NUM_THREADS\0omp_num_threads=3\0MKL_NUM_THREADS=4"
    assert parse_environ(raw) == (("MKL_NUM_THREADS", "4"),)


def test_values_are_printable_and_bounded() -> None:
    raw = b"OMP_NUM_THREADS=4\xff\0KMP_BLOCKTIME=" + b"9" * 1000 + b"\0"
    values = dict(parse_environ(raw))
    assert values["OMP_NUM_THREADS"] == "4\\xff"
    assert values["KMP_BLOCKTIME"] == "9" * VALUE_LIMIT


def test_an_empty_environ_is_all_unset() -> None:
    assert parse_environ(b"") == ()
    assert parse_environ(b"\0\0=\0") == ()
