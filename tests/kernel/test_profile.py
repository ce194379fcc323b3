"""`schedwatch profile` on a real spinner: the agent it opens in its process places the samples in the spinner's cgroup
and process, as many as the cgroup's CPU time at the sampling frequency, bounded by what cpu.stat says it used."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from agent.machine.cgroups.cpu import read_usage_v2
from tests.support.agent import REPO, require_root
from tests.support.schemas import assert_valid
from tests.support.workloads import CgroupSandbox

FREQUENCY = 49  # --sample-frequency's default: samples per second of CPU time
SECONDS = 2


def used_seconds(cgroups: CgroupSandbox, group: Path) -> float:
    usage = read_usage_v2(cgroups.root, cgroups.relative(group).lstrip("/"))
    assert usage is not None, f"no cpu.stat in {group}"
    return (usage.user_ns + usage.system_ns) / 1e9


def test_profile_counts_a_spinners_samples_in_its_cgroup_and_process(
    cgroups: CgroupSandbox, spinner: Path, tmp_path: Path
) -> None:
    require_root()
    group = cgroups.make("profiled")
    path = cgroups.relative(group)
    # One thread spinning for far longer than the profile lasts, unpinned; killed when the profile is done.
    spinning = subprocess.Popen([str(spinner), str(group), "1", "120", "-1", "1"], stdout=subprocess.PIPE)
    try:
        before, started = used_seconds(cgroups, group), time.monotonic()
        command = ["profile", "--json", "--duration", str(SECONDS), "--cgroup", path, "--state-dir", str(tmp_path)]
        result = subprocess.run(
            [sys.executable, "-m", "agent", *command, "--log-level", "error"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        used, lasted = used_seconds(cgroups, group) - before, time.monotonic() - started
        assert spinning.poll() is None, "the spinner must outlast the profile"
    finally:
        spinning.kill()
        spinning.wait()
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert_valid(report)
    (workload,) = report["workloads"]
    assert workload["workload"]["cgroup"] == path
    assert {row["pid"] for row in workload["rows"]} == {spinning.pid}
    assert {row["comm"] for row in workload["rows"]} == {"spinner"}
    # The window (SECONDS, within the profile's life) saw at most what the cgroup used while profile ran, and at
    # least that less what one thread can use in the rest of the profile's life.
    most = used * FREQUENCY
    least = max(0.0, used - (lasted - SECONDS)) * FREQUENCY
    assert most > 0, "the spinner used no CPU while profile ran"
    assert 0.8 * least - 3 <= workload["samples"] <= 1.2 * most + 3, (workload["samples"], least, most)
