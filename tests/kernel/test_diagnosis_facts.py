"""Live facts of real processes: a numpy 1.26 Pool and an OpenMP program started with a known environment that
holds a random secret, gathered from the real /proc. Needs root (it reads root's and switches to nobody)."""

from __future__ import annotations

import binascii
import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent import log
from agent.diagnosis.inputs.live.cpu_states import NodeStates, sample_node
from agent.diagnosis.inputs.processes.access import Access
from agent.diagnosis.inputs.processes.environment import ALLOWED
from agent.diagnosis.inputs.processes.sampling import CpuUsage, cpu_usage, read_process
from agent.diagnosis.inputs.processes.workload import WorkloadFacts, gather_workload, process_detail, to_jsonable
from agent.machine.procfs import ProcFS
from tests.support.agent import require_root
from tests.support.workloads import BUILD, SOURCES, CgroupSandbox, build

REPO = Path(__file__).resolve().parents[2]
NUMPY126 = BUILD / "numpy-1.26.4"  # numpy 1.26.4 and threadpoolctl, installed once (pip --target), ~20 s
WORKERS = 2
PIP_INSTALL = (sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target")

# The secret is only ever held in this bytearray (skipped by identity in the memory scan) and, while a process is
# started, in the bytes of its environment and argv, dropped once the test is done with that process.
CANARY = bytearray(b"schedwatch-canary-" + binascii.hexlify(os.urandom(12)))


@pytest.fixture(scope="module")
def numpy126() -> Path:
    require_root()
    if not NUMPY126.exists():
        partial = NUMPY126.with_name(NUMPY126.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run([*PIP_INSTALL, str(partial), "numpy==1.26.4", "threadpoolctl>=3"], check=True)
        partial.rename(NUMPY126)  # only a complete install is ever found
    return NUMPY126


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """The structlog configuration as it was before the test."""
    previous = structlog.get_config()
    yield
    structlog.configure(**previous)


@contextlib.contextmanager
def inherited_affinity(cpus: set[int] | None) -> Iterator[None]:
    """Children started meanwhile inherit *cpus*: set on this thread only (no Python runs between fork and exec)."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def started(
    command: list[str], extra: dict[str, str], cpus: set[int] | None = None, canary_in_argv: bool = False
) -> Iterator[tuple[int, Any]]:
    """Run *command* with a small known environment plus the canary; yield its pid and its first JSON line.

    With *canary_in_argv* the canary is the program's argv[0] too, so that its /proc/PID/cmdline holds it.
    """
    environment: dict[bytes, bytes] = {b"PATH": b"/usr/bin:/bin", b"OMP_NUM_THREADS": b"3"}
    environment.update((name.encode(), value.encode()) for name, value in extra.items())
    environment[b"SCHEDWATCH_CANARY"] = bytes(CANARY)
    argv: list[str | bytes] = [b"argv0-" + bytes(CANARY) if canary_in_argv else command[0], *command[1:]]
    with inherited_affinity(cpus):
        process = subprocess.Popen(
            argv,
            executable=command[0],
            env=environment,  # bytes names and values are accepted on POSIX
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
    del environment, argv
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, f"{command[0]} exited with {process.wait()}"
        yield process.pid, json.loads(line)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


def test_numpy126_pool_and_openmp_program(
    numpy126: Path, logging_restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    log.configure("debug", "json")  # in the test's own phase: to stderr as capsys captures it
    pool_command = [sys.executable, str(SOURCES / "blas_pool.py"), str(WORKERS), "0"]
    openmp_command = [str(build("openmp_pool", "-fopenmp")), "-", "0.2", "1"]
    with (
        started(pool_command, {"PYTHONPATH": str(numpy126)}) as (pool_pid, pool_truth),
        started(openmp_command, {}, cpus={1}, canary_in_argv=True) as (openmp_pid, openmp_truth),
    ):
        workers = sorted(int(pid) for pid in pool_truth["workers"])
        facts = gather_workload(ProcFS(), [pool_pid, *workers, openmp_pid], interval=0.2)
        check_pool(facts, pool_pid, workers, pool_truth)
        check_openmp(facts, openmp_pid, openmp_truth)
    check_canary_is_nowhere(facts, capsys.readouterr())


def check_pool(facts: WorkloadFacts, parent: int, workers: list[int], truth: dict[str, Any]) -> None:
    assert truth["numpy"] == "1.26.4"
    assert len(workers) == WORKERS, truth
    by_pid = {process.pid: process for process in facts.sample.processes}
    (pool,) = [pool for pool in facts.pools if pool.parent_pid == parent]
    assert pool.pids == tuple(workers)
    assert pool.command == by_pid[parent].exe_name == Path(os.path.realpath(sys.executable)).name
    for pid in workers:
        reported = truth["workers"][str(pid)]
        (blas,) = reported["blas"]
        assert by_pid[pid].threads == reported["threads"] == blas["num_threads"]
        assert by_pid[pid].affinity == tuple(sorted(os.sched_getaffinity(0)))
        detail = facts.details[pid]
        assert detail.maps_access is Access.READ
        (library,) = detail.libraries
        # threadpoolctl, run inside the worker, names the same file and version.
        assert (library.implementation, library.path, library.version) == ("openblas", blas["filepath"], "0.3.23.dev")
        assert library.version_source == "file name"
        expected = dict.fromkeys(ALLOWED, "unset")
        expected["OMP_NUM_THREADS"] = "3"
        assert detail.environment.as_dict() == expected


def check_openmp(facts: WorkloadFacts, pid: int, truth: dict[str, Any]) -> None:
    (process,) = [process for process in facts.sample.processes if process.pid == pid]
    assert process.threads == truth["threads"] == 3  # OMP_NUM_THREADS=3
    assert process.affinity == (1,)
    (library,) = facts.details[pid].libraries
    assert (library.api, library.implementation, library.version) == ("openmp", "gnu", "1.0.0")
    assert Path(library.path).name == "libgomp.so.1.0.0"
    assert facts.details[pid].environment.value("OMP_NUM_THREADS") == "3"


def check_canary_is_nowhere(facts: WorkloadFacts, output: Any) -> None:
    needle = bytes(CANARY)  # a copy, dropped before the memory scan
    assert "workload facts" in output.err  # the facts were logged: the log can be searched
    for text in (repr(facts), json.dumps(to_jsonable(facts)), output.out, output.err):
        assert needle.decode() not in text
    del needle
    gc.collect()
    leaked = list(objects_holding_canary())
    assert leaked == [], f"the canary is held in memory by {leaked}"


def objects_holding_canary() -> Iterator[str]:
    """Types of the live str/bytes objects (tracked by gc or referred to by one) that hold the canary."""
    seen: set[int] = {id(CANARY)}
    candidates = []
    for container in gc.get_objects():
        for item in (container, *gc.get_referents(container)):
            if isinstance(item, (str, bytes, bytearray)) and id(item) not in seen:
                seen.add(id(item))
                candidates.append(item)
    for item in candidates:
        raw = item.encode("utf-8", "surrogatepass") if isinstance(item, str) else item
        if CANARY in raw:
            yield type(item).__name__


def test_numpy2_openblas_version_is_read_from_the_mapped_file() -> None:
    """This process has numpy 2.x's OpenBLAS mapped (its file name has no version): the version is read through the
    real /proc/self/map_files, and is the one threadpoolctl asks the library for."""
    import numpy
    from threadpoolctl import threadpool_info

    (info,) = [entry for entry in threadpool_info() if entry["internal_api"] == "openblas"]
    assert numpy.__version__.startswith("2.")
    detail = process_detail(ProcFS(), os.getpid(), {})
    (library,) = [library for library in detail.libraries if library.implementation == "openblas"]
    assert (library.path, library.version, library.version_source) == (
        info["filepath"],
        info["version"],
        "file contents",
    )


def test_a_library_deleted_after_mapping_is_still_read_through_map_files(tmp_path: Path) -> None:
    """A copy of numpy 2.x's OpenBLAS, loaded by a process and then deleted: maps says "(deleted)", no path leads to
    the file any more, yet map_files still opens what was mapped (as for a file only a container's mounts hold)."""
    require_root()  # map_files needs CAP_SYS_ADMIN
    import numpy  # noqa: F401  (maps numpy 2.x's OpenBLAS into this process, for threadpoolctl to find)
    from threadpoolctl import threadpool_info

    (info,) = [entry for entry in threadpool_info() if entry["internal_api"] == "openblas"]
    shutil.copytree(Path(info["filepath"]).parent, tmp_path / "libs")  # with the libraries it needs ($ORIGIN)
    copy = tmp_path / "libs" / Path(info["filepath"]).name
    loader = f"import ctypes, sys; ctypes.CDLL({str(copy)!r}); print('{{}}', flush=True); sys.stdin.read()"
    with started([sys.executable, "-c", loader], {}) as (pid, _):
        copy.unlink()
        maps = ProcFS().read_text(pid, "maps") or ""
        assert f"{copy} (deleted)" in maps
        (library,) = process_detail(ProcFS(), pid, {}).libraries
    assert (library.path, library.version, library.version_source) == (
        str(copy),
        info["version"],
        "file contents",
    )


def test_another_users_maps_and_environ_are_not_permitted_not_unset() -> None:
    """Without ptrace read access (here: as nobody, reading a root process) maps and environ are refused."""
    require_root()
    reader = (
        "import json, sys\n"
        "from agent.diagnosis.inputs.processes.workload import process_detail, to_jsonable\n"
        "from agent.diagnosis.inputs.processes.sampling import read_process\n"
        "from agent.machine.procfs import ProcFS\n"
        "pid = int(sys.argv[1])\n"
        "detail = to_jsonable(process_detail(ProcFS(), pid, {}))\n"
        "facts = read_process(ProcFS(), pid)\n"
        "print(json.dumps({'detail': detail, 'exe': facts.exe_name, 'command': facts.command}))\n"
    )
    openmp_command = [str(build("openmp_pool", "-fopenmp")), "-", "0", "1"]
    with started(openmp_command, {}) as (pid, _):
        result = subprocess.run(
            [sys.executable, "-c", reader, str(pid)],
            cwd=REPO,
            capture_output=True,
            text=True,
            user=65534,
            group=65534,
            extra_groups=[],
            check=True,
        )
    seen = json.loads(result.stdout)
    assert seen["detail"]["maps_access"] == "not permitted"
    assert seen["detail"]["libraries"] == []
    assert seen["detail"]["environment"]["access"] == "not permitted"
    assert seen["exe"] is None
    assert seen["command"] == "openmp_pool"  # comm, readable by anyone
    assert bytes(CANARY).decode() not in result.stdout + result.stderr


def test_node_states_show_a_spinner_as_user_and_a_yielder_as_system(
    cgroups: CgroupSandbox, spinner: Path, yielder: Path
) -> None:
    """CPU 1 during a spinner, then during a yielder, each in a v1 cpu group weighted far above everything else on
    the machine (other tests share it) so that it owns most of CPU 1: the direction, and a rough share."""
    group = cgroups.make_v1("cpu", f"{cgroups.name}-diagnosis-{uuid.uuid4().hex[:6]}")  # top level: weighed against all
    (group / "cpu.shares").write_text("262144")
    procfs = ProcFS()
    spinning, spinner_use = run_pinned(procfs, [str(spinner), str(group), "2", "1.2", "1", "0"])
    yielding, yielder_use = run_pinned(procfs, [str(yielder), str(group), "1000000000", "2", "0"], cpus={1})
    spun, yielded = spinning.cpus[1], yielding.cpus[1]
    # The processes themselves (their own stat): the spinner's time is user time, the yielder's mostly system.
    assert spinner_use.user_percent > 70 and spinner_use.system_percent < 5, spinner_use
    # Two spinning threads share CPU 1 about evenly; the main thread waits at a barrier.
    busiest = sorted(thread.user_percent for thread in spinner_use.threads)
    assert len(busiest) == 3 and busiest[0] < 5 and 0.3 < busiest[1] / busiest[2] <= 1, spinner_use.threads
    assert yielder_use.system_percent > 50 and yielder_use.system_percent > yielder_use.user_percent, yielder_use
    # The node (/proc/stat) shows at least what they spent, and the swing from one to the other.
    assert spun.user > 70 and spun.user + 3 > spinner_use.user_percent, (spinning, spinner_use)
    assert yielded.system > 50 and yielded.system + 3 > yielder_use.system_percent, (yielding, yielder_use)
    assert spun.user > yielded.user + 30 and yielded.system > spun.system + 30, (spinning, yielding)


def run_pinned(procfs: ProcFS, command: list[str], cpus: set[int] | None = None) -> tuple[NodeStates, CpuUsage]:
    """Start *command*, let it run 0.2 s, then sample the node and the process over 0.8 s."""
    with inherited_affinity(cpus):
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        before = read_process(procfs, process.pid)
        states = sample_node(procfs, 0.8)
        after = read_process(procfs, process.pid)
    finally:
        process.kill()
        process.wait()
    assert before is not None and after is not None, f"{command[0]} ended early"
    usage = cpu_usage(before, after, states.seconds)
    assert usage is not None
    return states, usage
