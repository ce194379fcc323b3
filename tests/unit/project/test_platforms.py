"""The platform tier's own logic: which tests each layout runs, and how a run's results become the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.platforms import kernels
from tests.platforms.machines import HYBRID, MACHINES, SHORT, TIER, V1, V2, Machine, left_out, nodes_for
from tests.platforms.matrix import MEASURED_END, MEASURED_START, MachineResult, _read_junit, main, report, write_report

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="2">
<testcase classname="tests.kernel.test_platform" name="test_every_bpf_program_is_loaded" time="1.0">
<failure message="AssertionError: kernel 6.1.0-57-amd64: programs not loaded {'sched': ['sched_switch']}&#10;more">
invalid access to map value, value_size=160 off=2184 size=8</failure></testcase>
<testcase classname="tests.kernel.test_syscalls" name="test_yield_count_is_exact_per_process_and_cgroup[1-1]"
 time="2.0"/>
</testsuite></testsuites>
"""


def test_each_layout_runs_the_short_tier_and_pressure_only_where_cgroup2_is() -> None:
    for layout in (V2, V1):
        nodes = nodes_for(layout)
        for node in SHORT:  # named whole or inside a module run whole
            assert node in nodes or node.split("::")[0] in nodes, (layout, node)
    assert "tests/kernel/test_pressure.py" in nodes_for(V2)
    assert "tests/kernel/test_pressure.py" not in nodes_for(V1)
    assert [test.node for test in left_out(V1)] == ["tests/kernel/test_pressure.py"]
    assert all(test.why_not_elsewhere for test in TIER if len(test.layouts) < 3)


def test_the_pools_placement_runs_in_every_layout() -> None:
    for layout in (V2, V1, HYBRID):  # issue 31: the pool placed only in the workload's own hierarchy, each layout
        assert "tests/kernel/test_placement.py" in nodes_for(layout), layout


def test_a_test_of_a_module_run_whole_is_not_named_twice() -> None:
    nodes = nodes_for(V2)
    assert "tests/kernel/test_platform.py" in nodes
    assert not [node for node in nodes if node.startswith("tests/kernel/test_platform.py::")]
    assert len(nodes) == len(set(nodes))


def test_the_short_machine_is_debian_6_1_cgroup_v2_only() -> None:
    assert MACHINES[0] == Machine("debian-6.1-v2", "6.1", "amd64", V2)
    assert nodes_for(V2, short=True) == list(SHORT)


def test_junit_results_keep_each_tests_outcome_and_the_verifiers_words(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(JUNIT)
    result = MachineResult(MACHINES[0], "6.1.0-57-amd64")
    _read_junit(tmp_path / "junit.xml", result)
    loaded = "tests/kernel/test_platform.py::test_every_bpf_program_is_loaded"
    yields = "tests/kernel/test_syscalls.py::test_yield_count_is_exact_per_process_and_cgroup[1-1]"
    assert result.outcomes == {loaded: "failed", yields: "passed"}
    assert "value_size=160 off=2184" in result.details[loaded]
    assert result.messages[loaded].startswith("AssertionError: kernel 6.1.0-57-amd64")
    assert not result.passed
    result.seconds = 600
    table = report([result], "make platforms", "2026-12-07")
    assert "| debian-6.1-v2 | 6.1.0-57-amd64 | v2 | none | 2026-12-07 | 1 of 2 | FAIL | 10.0 |" in table
    assert "2026-12-07: `make platforms`, 10.0 min." in table
    assert f"- failed: `{loaded}`" in table


def test_a_machine_that_did_not_finish_is_no_pass() -> None:
    result = MachineResult(MACHINES[1], "6.1.0-57-amd64", failure="did not finish within 60 s")
    assert not result.passed
    assert "did not finish" in report([result], "make platforms")


def test_a_report_replaces_its_machines_parts_and_keeps_the_others(tmp_path: Path) -> None:
    v2, v1 = MachineResult(MACHINES[0], "6.1.0-57-amd64"), MachineResult(MACHINES[1], "6.1.0-57-amd64")
    v2.outcomes = v1.outcomes = {"tests/kernel/test_x.py::test_a": "failed"}
    document = tmp_path / "platforms.md"
    document.write_text(f"# head\n{MEASURED_START}\nold prose\n{MEASURED_END}\ntail\n")
    write_report(document, report([v1], "run 1", "2026-12-06"))
    v2.outcomes = v1.outcomes = {"tests/kernel/test_x.py::test_a": "passed"}
    write_report(document, report([v2], "run 2", "2026-12-07"))
    text = document.read_text()
    assert text.startswith(f"# head\n{MEASURED_START}\n") and text.endswith(f"{MEASURED_END}\ntail\n")
    assert "old prose" not in text
    rows = [line for line in text.splitlines() if line.startswith("| debian-")]
    assert [row.split(" | ")[0] for row in rows] == ["| debian-6.1-v2", "| debian-6.1-v1"]  # MACHINES' order
    assert "| 2026-12-07 | 1 of 1 | pass |" in rows[0] and "| 2026-12-06 | 0 of 1 | FAIL |" in rows[1]
    assert text.index("2026-12-07: `run 2`") < text.index("### debian-6.1-v1") < text.index("2026-12-06: `run 1`")
    write_report(document, report([v1], "run 3", "2026-12-08"))  # a machine's part is replaced, not repeated
    again = document.read_text()
    assert again.count("### debian-6.1-v1") == 1 and "run 1" not in again and "run 2" in again
    document.write_text("no markers")
    with pytest.raises(SystemExit, match="lacks the markers"):
        write_report(document, "x")


def test_the_newest_release_of_a_flavour_is_picked_by_number(monkeypatch: pytest.MonkeyPatch) -> None:
    listed = "\n".join(
        [
            "linux-image-6.1.0-9-amd64",
            "linux-image-6.1.0-57-amd64",
            "linux-image-6.1.0-57-cloud-amd64",
            "linux-image-6.1.0-57-rt-amd64",
            "linux-image-6.1.0-57-amd64-dbg",
            "linux-image-6.12.9+deb12-amd64",
            "linux-image-6.12.118+deb12-amd64",
            "linux-image-6.12.118+deb12-amd64-unsigned",
        ]
    )

    class Listed:
        stdout = listed

    monkeypatch.setattr(kernels.subprocess, "run", lambda *args, **kwargs: Listed())
    assert kernels.newest_release("6.1", "amd64") == "6.1.0-57-amd64"
    assert kernels.newest_release("6.1", "rt-amd64") == "6.1.0-57-rt-amd64"
    assert kernels.newest_release("6.12", "amd64") == "6.12.118+deb12-amd64"
    with pytest.raises(kernels.KernelUnavailable, match="apt-get update"):
        kernels.newest_release("5.10", "amd64")


def test_what_bpf_mode_cannot_count_is_told_by_kernel_release() -> None:
    from agent.bpf.probes.gaps import kernel_gaps

    assert kernel_gaps("6.18.44-fc-v1272") == ()
    on_61 = kernel_gaps("6.1.0-57-amd64")
    assert len(on_61) == 2
    assert 'schedwatch_sched_events_missed_total{event="wakeup"}' in on_61[0]
    assert "schedwatch_bpf_program_misses_total" in on_61[1]
    assert kernel_gaps("6.12.118+deb12-amd64") == on_61[:1]
    assert kernel_gaps("5.15.0-100-generic") == on_61[1:]


def test_a_rerun_of_some_tests_cannot_replace_a_machines_whole_tier_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --tests run's 3 of 3 once took the place of a machine's 12 of 15 in docs/platforms.md."""
    document = tmp_path / "platforms.md"
    with pytest.raises(SystemExit) as refused:
        main(["--machines", "debian-6.1-v1", "--tests", "tests/kernel/test_sched.py", "--report", str(document)])
    assert refused.value.code == 2
    assert "--report keeps each machine's whole tier" in capsys.readouterr().err
    assert not document.exists()
