"""`schedwatch verify`'s CPU time of a run: from the run cgroup's cpu.stat, unknown (never 0) when it has none."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.commands.verify import Report, to_json, to_text
from agent.diagnosis.inputs.processes.sampling import ProcessSample
from agent.diagnosis.inputs.processes.workload import WorkloadFacts
from agent.machine.cgroups.cpu import read_usage_v2
from agent.verification.fix import Recommendation, _facts_of
from agent.verification.runner import Counts, Run, cpu_seconds
from agent.verification.verdict import Verdict
from tests.support.schemas import assert_valid

V2_CPU_STAT = "usage_usec 2511224\nuser_usec 2498710\nsystem_usec 12514\n"
NO_PROCESSES = WorkloadFacts(ProcessSample((), {}, 1.0), (), {})


def run(user: float | None, system: float | None) -> Run:
    counts = Counts(0, {"wait": 0, "wake": 0}, 0.0, 0.0, 0.0)
    return Run("as is", 1, {}, 0, 4.0, user, system, counts, 3)


def test_cpu_seconds_between_two_readings_of_cpu_stat(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "cpu.stat").write_text("usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
    before = read_usage_v2(tmp_path, "run")
    (tmp_path / "run" / "cpu.stat").write_text(V2_CPU_STAT)
    assert cpu_seconds(before, read_usage_v2(tmp_path, "run")) == (2.49871, 0.012514)


@pytest.mark.parametrize("after", [None, "usage_usec 10\n"])
def test_cpu_seconds_without_cpu_stat_are_unknown(tmp_path: Path, after: str | None) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "cpu.stat").write_text(V2_CPU_STAT)
    before = read_usage_v2(tmp_path, "run")
    if after is None:
        (tmp_path / "run" / "cpu.stat").unlink()
    else:
        (tmp_path / "run" / "cpu.stat").write_text(after)
    assert cpu_seconds(before, read_usage_v2(tmp_path, "run")) == (None, None)


def test_the_diagnosis_of_a_run_without_cpu_time_has_cpu_use_unknown_not_zero() -> None:
    (workload,) = _facts_of(run(None, None), NO_PROCESSES, 2.0, None).workloads
    assert (workload.cpu_used_cores, workload.system_share) == (None, None)
    (workload,) = _facts_of(run(3.0, 1.0), NO_PROCESSES, 2.0, None).workloads
    assert (workload.cpu_used_cores, workload.system_share) == (1.0, 0.25)


def test_the_report_says_cpu_time_not_read() -> None:
    as_is, fixed = run(None, None), run(3.0, 1.0)
    report = Report(
        ["true"], "bpf", 2.0, Recommendation({}, "test"), [as_is, fixed], as_is, fixed, Verdict(False, 1.0, False, "")
    )
    lines = to_text(report).splitlines()
    assert [line.split()[2:] for line in lines if line.startswith(("user CPU", "system CPU"))] == [
        ["not", "read", "3.00", "s"],
        ["not", "read", "1.00", "s"],
    ]


def test_counts_a_mode_cannot_give_are_not_counted_in_the_report_and_null_in_json() -> None:
    unknown = Counts(None, None, None, 1.5, None)
    as_is = Run("as is", 1, {}, 0, 4.0, 3.0, 1.0, unknown, 3)
    fixed = Run("fixed", 1, {"OMP_NUM_THREADS": "1"}, 0, 2.0, 1.5, 0.1, unknown, 3)
    report = Report(
        ["true"], "procfs", 2.0, Recommendation({}, "test"), [as_is, fixed], as_is, fixed, Verdict(True, 2.0, False, "")
    )
    lines = to_text(report).splitlines()
    assert "  counted in procfs mode (what it cannot count: docs/modes.md)" in lines
    for row in ("sched_yield calls", "futex calls", "futex wait", "preempted"):
        (line,) = [line for line in lines if line.startswith(row)]
        assert line.split()[-4:] == ["not", "counted", "not", "counted"], line
    document = to_json(report)
    assert document["schema"] == "schedwatch.verify/v2" and document["mode"] == "procfs"
    assert_valid(document)
    assert document["as_is"]["sched_yield_calls"] is None and document["as_is"]["runqueue_wait_seconds"] == 1.5
