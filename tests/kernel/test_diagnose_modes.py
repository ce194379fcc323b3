"""`schedwatch diagnose` loads its collectors as `run` does: --mode is honoured, auto falls back from BPF to perf
counters (a seccomp filter refusing bpf(): the seed's host class) and /proc, and the report says which mode
measured it and what that mode could not tell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.kernel.test_diagnosis_facts import numpy126  # noqa: F401 (a fixture)
from tests.support.diagnose import HERE, Diagnose
from tests.support.workloads import SOURCES, CgroupSandbox, build

WINDOW = 8  # seconds: the pool starts inside the window and keeps its BLAS threads busy for most of it
WORKERS = 4  # on this 2-CPU machine: 4 workers x a 2-thread OpenBLAS pool each


def pool_in(group: Path, numpy: Path, busy: float) -> subprocess.Popen[bytes]:
    """The numpy 1.26 pool of WORKERS workers in *group*, busy for *busy* seconds, then idle until stdin closes."""
    enter = f'echo $$ > {group}/cgroup.procs && exec "$@"'
    return subprocess.Popen(
        ["sh", "-c", enter, "sh", sys.executable, str(SOURCES / "blas_pool.py"), str(WORKERS), str(busy)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(numpy)},
    )


def diagnosed(command: tuple[str, ...], flags: list[str], group: Path, numpy: Path) -> dict[str, Any]:
    diagnose = Diagnose("--duration", str(WINDOW), *flags, command=command)
    diagnose.wait_for_window()
    pool = pool_in(group, numpy, busy=WINDOW - 3)
    try:
        assert pool.stdout is not None
        truth = json.loads(pool.stdout.readline())
        assert truth["numpy"] == "1.26.4"
        return diagnose.result()
    finally:
        assert pool.stdin is not None
        pool.stdin.close()
        pool.wait(timeout=60)


def workload_of(report: dict[str, Any], cgroup: str) -> dict[str, Any]:
    found = [view for view in report["workloads"] if view["ref"]["cgroup"] == cgroup]
    assert len(found) == 1, [view["ref"] for view in report["workloads"]]
    return found[0]


def causes_of(report: dict[str, Any], cgroup: str) -> set[tuple[str, str]]:
    return {
        (finding["cause"], finding["mechanism"])
        for finding in report["findings"]
        if finding["workload"]["cgroup"] == cgroup
    }


def test_auto_mode_under_a_seccomp_filter_refusing_bpf_names_the_pool_from_perf_counters(
    cgroups: CgroupSandbox,
    numpy126: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    group = cgroups.make("diagnose-perf")
    cgroup = cgroups.relative(group)
    no_bpf = str(build("no_bpf"))
    report = diagnosed((no_bpf, *HERE), ["--cgroup", cgroup, "--state-dir", str(tmp_path)], group, numpy126)
    assert report["sources"] == ["perf (collectors loaded by diagnose)"]
    view = workload_of(report, cgroup)
    assert view["sched_yield_calls"] > 10_000, "4 OpenBLAS 0.3.23 pools on 2 CPUs spin in sched_yield"
    assert view["futex_wait_seconds"] is None, "perf counters cannot time a futex wait"
    assert ("thread-pool-oversubscription", "yield-storm") in causes_of(report, cgroup), report["findings"]


def test_procfs_mode_says_what_it_cannot_count_and_still_reads_the_pool(
    cgroups: CgroupSandbox,
    numpy126: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    group = cgroups.make("diagnose-procfs")
    cgroup = cgroups.relative(group)
    flags = ["--mode", "procfs", "--cgroup", cgroup, "--state-dir", str(tmp_path)]
    report = diagnosed(HERE, flags, group, numpy126)
    assert report["sources"] == ["procfs (collectors loaded by diagnose)"]
    view = workload_of(report, cgroup)
    assert view["sched_yield_calls"] is None and view["futex_calls"] is None, "procfs mode counts no syscalls"
    assert view["runqueue_wait_seconds"] > 0.5, "8 busy BLAS threads on 2 CPUs wait for them"
    assert [len(pool["pids"]) for pool in view["pools"]] == [WORKERS]
    assert {library["implementation"] for library in view["libraries"]} >= {"openblas"}
    assert "thread-pool-oversubscription" in {cause for cause, _mechanism in causes_of(report, cgroup)}
    assert any("syscalls" in note and "unknown, not zero" in note for note in report["notes"]), report["notes"]
