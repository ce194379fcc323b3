"""`schedwatch analyze` and `schedwatch compare` as a user runs them: exit status, what goes to stdout and
stderr, the JSON contracts, the HTML file, and the one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.diagnosis.findings import SCHEMA
from agent.diagnosis.inputs.artifacts import formats
from tests.support.schemas import assert_valid
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"
GCP = [str(FIXTURES / "gcp_perf_trace_s.txt"), str(FIXTURES / "gcp_top.txt")]
BARE = str(FIXTURES / "baremetal_perf_trace_s.txt")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_analyze_prints_the_tree(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    status, out, err = run(capsys, "analyze", *GCP)
    assert (status, err) == (0, "")
    assert "\x1b[" not in out  # captured, not a terminal: plain text
    assert "finding: thread-pool-oversubscription / yield-storm" in out
    assert "sched_yield calls per spinning thread (median): 5,455,132 calls" in out
    assert "2847 python: sched_yield 5,119,771 (63.4 s)" in out


def test_analyze_json_is_the_diagnosis_contract(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "analyze", "--json", *GCP)
    document = json.loads(out)
    assert status == 0 and document["schema"] == SCHEMA
    assert_valid(document)
    assert [(f["cause"], f["mechanism"]) for f in document["findings"]] == [
        ("thread-pool-oversubscription", "yield-storm")
    ]
    assert document["sources"] == ["perf trace -s gcp_perf_trace_s.txt", "top gcp_top.txt"]
    assert document["workloads"][0]["sched_yield_calls"] == 84_921_956
    assert document["workloads"][0]["seconds"] is None  # unknown, not 0


def test_analyze_reads_back_its_own_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, saved, _ = run(capsys, "analyze", "--json", *GCP)
    report = tmp_path / "gcp.json"
    report.write_text(saved)
    status, again, _ = run(capsys, "analyze", "--json", str(report))
    first, second = json.loads(saved), json.loads(again)
    assert first.pop("made")["at"] <= second.pop("made")["at"]  # each report says when it was made
    assert status == 0 and second == first


def test_analyze_writes_the_html_page(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    status, out, err = run(capsys, "analyze", "--html", str(page), *GCP)
    assert status == 0 and err == f"wrote {page}\n" and "finding:" in out
    assert "thread-pool-oversubscription / yield-storm" in page.read_text(encoding="utf-8")


def test_analyze_unknown_format_is_one_line_naming_the_formats(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    odd = tmp_path / "odd.txt"
    odd.write_text("Traceback (most recent call last):\n  File x\n")
    status, out, err = run(capsys, "analyze", str(odd))
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"schedwatch analyze: {odd}: not output of a tool schedwatch reads")
    assert "perf trace -s; strace -c (-f, -w); top -b (-H)" in err and "schedwatch diagnose --json" in err


def test_analyze_reads_the_rest_when_one_file_is_not_readable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    odd = tmp_path / "odd.txt"
    odd.write_text("Traceback (most recent call last):\n  File x\n")
    status, out, err = run(capsys, "analyze", "--json", *GCP, str(odd))
    assert (status, err) == (0, "")
    report = json.loads(out)
    assert "thread-pool-oversubscription" in out  # the two readable files are analysed
    [note] = [note for note in report["notes"] if note.startswith("not read: ")]
    assert note == "not read: 1 file is not tool output: 1 text; formats read: docs/analyze.md"


def test_analyze_fails_only_when_no_file_is_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    odd = tmp_path / "odd.txt"
    odd.write_text("Traceback (most recent call last):\n")
    status, out, err = run(capsys, "analyze", str(odd), "/nonexistent/b.txt")
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("schedwatch analyze: no file could be read: 1 file is not tool output: 1 text; ")
    assert "/nonexistent/b.txt: cannot read it" in err


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("public_time_v_borg2196.txt", "public_perf_stat_vim1089_de.txt"),  # the new formats on both sides
        ("public_time_bash_hyperfine515.txt", "gcp_perf_trace_s.txt"),  # a new format against an old one
        ("public_perf_report_hhvm5081_futex.txt", "public_stacks_openblas4496_yield_quoted.txt"),  # profile, stacks
        ("public_cgroup_cpu_stat_k0s4954_throttled.txt", "sick_perf_trace_s.txt"),  # cpu.stat against a trace
        ("public_pressure_flatcar638_cat_prompts.txt", "public_proc_status_readitlater11567_elided.txt"),
    ],
)
def test_compare_reads_the_new_formats_on_either_side(capsys: pytest.CaptureFixture[str], a: str, b: str) -> None:
    status, out, err = run(capsys, "compare", "--json", str(FIXTURES / a), str(FIXTURES / b))
    assert (status, err) == (0, "")
    report = json.loads(out)
    assert_valid(report)
    sources = json.dumps(report)
    assert a in sources and b in sources
    status, out, err = run(capsys, "compare", "--json", str(FIXTURES / b), str(FIXTURES / a))
    assert (status, err) == (0, "")


def one_fixture_per_format() -> dict[str, str]:
    """For each format but a saved report, the first fixture (by name) that it reads."""
    chosen: dict[str, str] = {}
    for path in sorted(FIXTURES.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        fmt = next((row for row in formats.FORMATS if row.looks_like(text)), None)
        if fmt is not None and fmt.name not in chosen:
            chosen[fmt.name] = path.name
    return chosen


PER_FORMAT = one_fixture_per_format()


def test_there_is_a_fixture_of_every_format() -> None:
    assert set(PER_FORMAT) == {row.name for row in formats.FORMATS} - {"schedwatch diagnose --json"}


@pytest.mark.parametrize("fmt", sorted(PER_FORMAT))
def test_compare_takes_every_format_on_either_side(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    """Each format against the next one in the table, as A and as B."""
    names = sorted(PER_FORMAT)
    mine, other = PER_FORMAT[fmt], PER_FORMAT[names[(names.index(fmt) + 1) % len(names)]]
    for a, b in ((mine, other), (other, mine)):
        status, out, err = run(capsys, "compare", "--json", str(FIXTURES / a), str(FIXTURES / b))
        assert (status, err) == (0, ""), (a, b)
        report = json.loads(out)
        assert_valid(report)
        assert a in json.dumps(report["a"]) and b in json.dumps(report["b"])


def test_analyze_reads_a_new_format_beside_a_file_it_cannot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    odd = tmp_path / "notes.txt"
    odd.write_text("the VM is slow since Tuesday\n")
    flood = str(FIXTURES / "recorded_proc_softirqs_udp_flood.txt")
    status, out, err = run(capsys, "analyze", "--json", flood, str(odd))
    assert (status, err) == (0, "")
    report = json.loads(out)
    assert [observation["topic"] for observation in report["observations"]] == ["softirqs-on-one-cpu"]
    [note] = [note for note in report["notes"] if note.startswith("not read: ")]
    assert note == "not read: 1 file is not tool output: 1 text; formats read: docs/analyze.md"


def test_compare_two_paths(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    gcp = tmp_path / "gcp"
    gcp.mkdir()
    for name in GCP:
        shutil.copy(name, gcp)
    status, out, err = run(capsys, "compare", str(gcp), BARE)
    assert (status, err) == (0, "")
    assert out.startswith("schedwatch compare: gcp vs baremetal\n")
    assert "gcp is the slow side" in out and "thread-pool-oversubscription / yield-storm in gcp" in out
    assert "In gcp 16 of 20 traced threads spun in sched_yield" in out


def test_compare_json_and_html(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    argv = ["compare", "--a", *GCP, "--b", BARE, "--a-name", "GCP", "--b-name", "bare metal", "--json"]
    status, out, _ = run(capsys, *argv, "--html", str(page))
    document = json.loads(out)
    assert status == 0 and document["schema"] == "schedwatch.comparison/v2"
    assert_valid(document)
    assert (document["a"]["name"], document["b"]["name"], document["cause_side"]) == ("GCP", "bare metal", "GCP")
    assert document["a"]["schema"] == SCHEMA and document["b"]["findings"] == []
    assert document["cause"]["cause"] == "thread-pool-oversubscription"
    spinning = next(d for d in document["differences"] if d["fact"] == "threads spinning in sched_yield")
    assert (spinning["a"], spinning["b"]) == (16, 1)
    assert "Why they differ" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", BARE], "give two environments, A and B (got 1)"),
        (["compare", BARE, BARE, "--a", BARE], "either as two paths or with --a/--b, not both"),
        (["compare", "--a", BARE], "give two environments"),
        (["compare", BARE, "/nonexistent/b.txt"], "/nonexistent/b.txt: cannot read it"),
    ],
)
def test_compare_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and message in err


def test_compare_two_saved_reports_as_the_artifacts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    saved = []
    for name, files in (("gcp.json", GCP), ("bare.json", [BARE])):
        _, report, _ = run(capsys, "analyze", "--json", *files)
        (tmp_path / name).write_text(report)
        saved.append(str(tmp_path / name))
    _, from_reports, _ = run(capsys, "compare", "--json", *saved, "--a-name", "GCP", "--b-name", "bare metal")
    argv = ["compare", "--json", "--a", *GCP, "--b", BARE, "--a-name", "GCP", "--b-name", "bare metal"]
    _, from_artifacts, _ = run(capsys, *argv)
    assert unmade(json.loads(from_reports)) == unmade(json.loads(from_artifacts))


def unmade(document: dict[str, Any]) -> dict[str, Any]:
    """A comparison without when it was made (two runs may straddle a second)."""
    return {
        key: {k: v for k, v in value.items() if k != "made"} if key in ("a", "b") else value
        for key, value in document.items()
        if key != "made"
    }
