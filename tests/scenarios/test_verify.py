"""`schedwatch verify` on real commands: a numpy 1.26 Pool whose fix must remove the yields and speed it up, a
command with nothing to fix, and the usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.scenarios.catalog import WORKERS, numpy_target
from tests.support.agent import REPO, require_root
from tests.support.workloads import SOURCES, build

TASKS = 400  # fixed work: ~3-4 s as it is on 2 CPUs


def verify(tmp_path: Path, *command: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    """`schedwatch verify --json -- COMMAND`: exit status, the JSON report, and what went to stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "agent", "verify", "--json", "--state-dir", str(tmp_path), "--", *command],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.stdout.strip(), f"no report (exit {result.returncode}): {result.stderr[-3000:]}"
    return result.returncode, json.loads(result.stdout), result.stderr


def test_the_fix_removes_a_numpy126_pools_yields_and_speeds_it_up(tmp_path: Path) -> None:
    require_root()
    numpy126 = numpy_target("1.26")
    command = [sys.executable, str(SOURCES / "numpy_pool.py"), "-", str(WORKERS), "unset", str(TASKS), "0"]
    status, report, stderr = verify(tmp_path, *command, env={"PYTHONPATH": str(numpy126)})
    as_is, fixed = report["runs"]
    # The command's own report of each run (its stdout goes to stderr with --json): pool time and BLAS threads.
    truths = [json.loads(line) for line in stderr.splitlines() if line.startswith('{"pid"')]
    assert len(truths) == 2, stderr[-3000:]
    assert truths[0]["blas"] == ["openblas 0.3.23.dev threads=2"], truths  # sized to both CPUs: the disease
    assert truths[1]["blas"] == ["openblas 0.3.23.dev threads=1"], truths  # the fix reached every worker
    # 2 CPUs / 4 pool workers, at least 1: from the diagnosis of the first run.
    assert report["fix"]["variables"]["OPENBLAS_NUM_THREADS"] == "1", report["fix"]
    assert report["fix"]["finding"] == "thread-pool-oversubscription/yield-storm", report["fix"]
    assert as_is["exit_status"] == fixed["exit_status"] == 0
    for run, truth in zip((as_is, fixed), truths, strict=True):
        assert truth["seconds"] < run["wall_seconds"] < truth["seconds"] + 5, (run, truth)
    assert as_is["sched_yield_calls"] > 100_000, as_is
    assert fixed["sched_yield_calls"] == 0, fixed  # one BLAS thread per worker: no pool thread left to yield
    assert fixed["runqueue_wait_seconds"] < as_is["runqueue_wait_seconds"] / 2, (as_is, fixed)
    assert as_is["system_seconds"] > 2 * fixed["system_seconds"], (as_is, fixed)
    assert report["verdict"]["helps"] is True and report["verdict"]["speedup"] > 1.0, report["verdict"]
    assert truths[0]["seconds"] > truths[1]["seconds"], truths  # the command's own clock agrees
    assert status == 0


def test_a_command_with_nothing_to_fix_is_reported_as_not_helped(tmp_path: Path) -> None:
    require_root()
    sleeper = build("sleeper")
    status, report, _ = verify(tmp_path, str(sleeper), "-", "10", "100000000", "0")  # 1 s of sleeping
    as_is, fixed = report["runs"]
    for run in (as_is, fixed):
        assert run["exit_status"] == 0
        assert 1.0 <= run["wall_seconds"] < 2.0, run
        assert run["sched_yield_calls"] == 0 and run["runqueue_wait_seconds"] < 0.1, run
    assert report["fix"]["variables"]["OMP_NUM_THREADS"] == "1"  # no pool seen: 1 per process, and it says so
    assert "1 thread per process" in report["fix"]["source"], report["fix"]
    assert report["verdict"]["helps"] is False, report["verdict"]
    assert status == 1


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    for arguments, said in (
        ([], "no command"),
        (["--duration-limit", "0", "--", "true"], "--duration-limit must be"),
        (["--cpus", "0", "--", "true"], "--cpus must be"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "agent", "verify", *arguments], cwd=REPO, capture_output=True, text=True
        )
        assert result.returncode == 2, (arguments, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], (arguments, result.stderr)
