"""Every subcommand run by an unprivileged user: what it can do it does, what it cannot it says in one line (what is
missing and how to get it), and never a traceback."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.agent import REPO, free_port, require_root
from tests.support.schemas import assert_valid

NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "analyze"


def as_nobody(*arguments: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    require_root()  # to become nobody
    return subprocess.run(
        [*NOBODY, sys.executable, "-m", "agent", *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def without_logs(stderr: str) -> list[str]:
    """stderr less the structured log lines (JSON objects): what a person was told."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith("{")]


@pytest.fixture
def state(tmp_path: Path) -> Path:
    tmp_path.chmod(0o777)
    return tmp_path


def test_check_reports_what_it_can_see_and_marks_the_rest(state: Path) -> None:
    result = as_nobody("check", "--state-dir", str(state))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1  # the BPF collectors cannot run
    lines = result.stdout.splitlines()
    assert any(line.startswith("  kernel       ") for line in lines)
    assert any(line.startswith("  cgroups      ") and "cgroup2 at" in line for line in lines)
    assert "  futex2       not checked: tracefs is readable by root only here (run it as root, e.g. with sudo)" in lines
    assert any(line.startswith("  syscalls         CANNOT RUN: missing CAP_BPF") for line in lines), result.stdout
    assert any(line.startswith("  mode         procfs (--mode auto)") for line in lines), result.stdout


def test_check_says_tracefs_is_mounted_but_root_only_and_never_to_mount_it(state: Path) -> None:
    assert (Path("/sys/kernel/tracing") / "events").is_dir(), "this test needs tracefs mounted (as root it is)"
    result = as_nobody("check", "--no-load", "--state-dir", str(state))
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    tracefs = "  tracefs      /sys/kernel/tracing: mounted, readable by root only — fix: run it as root, e.g. with sudo"
    assert any(line.startswith(tracefs) for line in lines), result.stdout
    (mode,) = [line for line in lines if line.startswith("  mode         ")]
    assert mode.endswith("; perf counters cannot either: tracefs at /sys/kernel/tracing is readable by root only")
    assert "not mounted" not in result.stdout and "mount -t tracefs" not in result.stdout, result.stdout


def test_check_json_says_the_same(state: Path) -> None:
    result = as_nobody("check", "--format", "json", "--state-dir", str(state))
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert_valid(report)
    assert report["machine"]["is_root"] is False
    assert report["not_checked"]["futex2"].startswith("not checked: tracefs is readable by root only")
    assert report["collectors"]["syscalls"]["ok"] is False and report["mode"]["mode"] == "procfs"


def test_top_answers_from_proc_with_dashes_for_what_proc_cannot_count(state: Path) -> None:
    result = as_nobody("top", "--once", "--interval", "1", "--state-dir", str(state), "--log-level", "error")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    title, header, *rows = result.stdout.splitlines()
    assert title == "schedwatch top: collectors loaded here  sorted by cpu"
    names = header.replace("RQ p99", "RQ-p99").split()
    root = dict(zip(names, next(row for row in rows if row.startswith("/ ")).split(), strict=True))
    assert root["YIELD/s"] == "-" and root["FUTEX/s"] == "-"  # procfs mode counts no system calls: unknown
    assert float(root["WAIT"]) >= 0.0  # /proc/PID/schedstat gives the run-queue wait


def test_diagnose_answers_from_proc(state: Path) -> None:
    result = as_nobody("diagnose", "--json", "--duration", "1", "--state-dir", str(state), "--log-level", "error")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_valid(report)
    assert report["sources"] == ["procfs (collectors loaded by diagnose)"]


def test_verify_says_it_needs_root_in_one_line(state: Path) -> None:
    result = as_nobody("verify", "--state-dir", str(state), "--", "true")
    assert result.returncode == 3
    assert without_logs(result.stderr) == [
        "schedwatch verify: needs root (it makes a cgroup for each run; bpf mode loads programs): run it with sudo"
    ]


def test_analyze_and_compare_need_no_privilege() -> None:
    analyzed = as_nobody("analyze", "--json", str(FIXTURES / "clock_strace_fc.txt"))
    assert analyzed.returncode == 0 and "Traceback" not in analyzed.stderr, analyzed.stderr
    assert json.loads(analyzed.stdout)["schema"] == "schedwatch.diagnosis/v2"
    assert_valid(json.loads(analyzed.stdout))
    compared = as_nobody("compare", str(FIXTURES / "clock_strace_fc.txt"), str(FIXTURES / "clock_top_b.txt"))
    assert compared.returncode == 0 and "Traceback" not in compared.stderr, compared.stderr


def test_run_serves_in_procfs_mode_and_says_why(state: Path) -> None:
    require_root()
    port = free_port()
    agent = subprocess.Popen(
        [*NOBODY, sys.executable, "-m", "agent", "run", "--listen", f"127.0.0.1:{port}", "--state-dir", str(state)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        body = ""
        while time.monotonic() < deadline and "schedwatch_mode" not in body:
            time.sleep(0.5)
            with contextlib.suppress(OSError):
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert 'schedwatch_mode{mode="procfs"} 1.0' in body
    finally:
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0
    assert "Traceback" not in stderr, stderr
    modes = [json.loads(line) for line in stderr.splitlines() if '"event": "mode"' in line]
    assert len(modes) == 1 and "missing CAP_BPF" in modes[0]["reason"], stderr


@pytest.mark.parametrize("command", ["run", "check", "diagnose", "top", "verify", "analyze", "compare"])
def test_every_subcommands_help_works(command: str) -> None:
    result = as_nobody(command, "--help")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stdout.startswith("usage: schedwatch")
