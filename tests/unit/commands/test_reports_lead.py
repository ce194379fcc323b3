"""Reports lead with the answer, on the seed case's own files as a user runs `analyze` and `compare`: which side is
slow, the cause and the fix with its number where the CPUs and workers are known (from a file, or told with --cpus
and --workers), else the formula and what would give it; provenance at the top; each finding once; counts as
integers and unknown names as null in JSON; `-` is standard input; the sides named by what their files share."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent import __version__
from agent.cli import main
from tests.support.agent import REPO
from tests.support.schemas import assert_valid
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"
GCP = [str(FIXTURES / "gcp_perf_trace_s.txt"), str(FIXTURES / "gcp_top.txt")]
BARE = str(FIXTURES / "baremetal_perf_trace_s.txt")
SEED = ["compare", "--a", *GCP, "--b", BARE]
MPSTAT_2_CPUS = str(FIXTURES / "healthy_mpstat.txt")  # recorded on a 2-CPU machine (fixtures/artifacts/README.md)
CAUSE = "thread-pool-oversubscription / yield-storm"
TEXT_LINES_BEFORE = 186  # the seed's `compare` text report before it led with the answer (issue 32)


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "80")
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_compare_names_its_sides_by_what_their_files_share(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, _ = run(capsys, monkeypatch, *SEED)
    assert status == 0
    assert out.splitlines()[0] == "schedwatch compare: gcp vs baremetal"  # was "A vs baremetal_perf_trace_s"


def test_the_text_report_leads_with_the_slow_side_the_cause_and_the_inputs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, _ = run(capsys, monkeypatch, *SEED)
    assert status == 0
    lines = out.splitlines()
    assert re.fullmatch(
        rf"├── schedwatch {re.escape(__version__)} compare, \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC", lines[1]
    )
    assert (lines[2] + lines[3]).startswith(
        "├── gcp is the slow side: the cause is there. By how much these inputs do not"
    )
    assert lines[4].startswith(f"├── finding: {CAUSE} in gcp")
    head = "\n".join(lines[:60])
    assert "gcp: perf trace -s gcp_perf_trace_s.txt; top gcp_top.txt" in head
    assert "baremetal: perf trace -s baremetal_perf_trace_s.txt" in head


def test_each_finding_is_said_once_and_the_text_is_shorter(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out, _ = run(capsys, monkeypatch, *SEED)
    assert out.count(CAUSE) == 1
    assert out.count("Each worker process runs a BLAS/OpenMP thread pool") == 1
    assert len(out.splitlines()) < 0.8 * TEXT_LINES_BEFORE
    _, out, _ = run(capsys, monkeypatch, "analyze", *GCP)
    assert out.count(CAUSE) == 1 and out.count("fix: Limit each worker's thread pool") == 1


def test_told_cpus_and_workers_give_the_fix_its_number(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, _ = run(capsys, monkeypatch, *SEED, "--cpus", "32", "--workers", "14", "--json")
    document = json.loads(out)
    assert status == 0
    assert_valid(document)
    fix = document["cause"]["fix"]
    assert fix["threads_per_process"] == 2 and fix["variables"]["OMP_NUM_THREADS"] == "2"
    assert fix["missing"] == []
    assert "so that 14 workers x 2 threads fit 32 CPUs" in fix["steps"][0]
    assert document["a"]["sources"][-1] == "told on the command line: --cpus 32 --workers 14"
    assert document["b"]["node"]["cpus"] is None  # told of the side with the cause, not of both
    _, text, _ = run(capsys, monkeypatch, *SEED, "--cpus", "32", "--workers", "14")
    assert "Docker: -e OPENBLAS_NUM_THREADS=2 -e MKL_NUM_THREADS=2 -e \n" in text or "-e OMP_NUM_THREADS=2" in text


def test_without_cpus_and_workers_the_fix_gives_the_formula_and_what_would_give_n(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out, _ = run(capsys, monkeypatch, *SEED, "--json")
    fix = json.loads(out)["cause"]["fix"]
    assert fix["threads_per_process"] is None and fix["variables"] == {}
    assert "N = the CPUs it may use / its pool workers" in fix["summary"]
    workers, cpus = fix["missing"]
    assert workers.startswith("its pool workers were not counted here") and "--workers N" in workers
    assert cpus.startswith("the CPUs it may use are not known here") and "--cpus N" in cpus
    assert any(step.startswith("For N: its pool workers") for step in fix["steps"])


def test_cpus_from_a_file_without_workers_do_not_make_a_number_up(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """mpstat shows 2 CPUs; no input shows the pool's workers: the fix must not assume one worker (it said "limit
    each worker's pool to 2 threads, so that 1 worker x 2 threads fit 2 CPUs")."""
    _, out, _ = run(capsys, monkeypatch, "analyze", "--json", GCP[0], MPSTAT_2_CPUS)
    document = json.loads(out)
    assert document["node"]["cpus"] == 2
    (finding,) = document["findings"]
    assert finding["fix"]["threads_per_process"] is None
    (missing,) = finding["fix"]["missing"]
    assert missing.startswith("its pool workers were not counted here")
    _, out, _ = run(capsys, monkeypatch, "analyze", "--json", GCP[0], MPSTAT_2_CPUS, "--workers", "14")
    assert json.loads(out)["findings"][0]["fix"]["threads_per_process"] == 1  # max(1, 2 // 14)


def test_json_counts_are_integers_and_unknown_names_null(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out, _ = run(capsys, monkeypatch, *SEED, "--json")
    document = json.loads(out)
    workload = document["a"]["workloads"][0]
    assert workload["threads"] == 20 and isinstance(workload["threads"], int)
    assert isinstance(workload["sched_yield_calls"], int)
    assert isinstance(document["a"]["node"]["run_queue"], int)
    traced = next(d for d in document["differences"] if d["fact"] == "threads traced")
    assert (traced["a"], traced["b"]) == (20, 39) and isinstance(traced["a"], int)
    assert '"threads": 20.0' not in out and '": ""' not in out
    assert workload["ref"] == dict.fromkeys(("container_id", "container", "pod", "namespace", "cgroup"))
    assert document["slower"] == {
        "side": "gcp",
        "factor": None,
        "basis": "the cause is there",
        "would_tell": "`time` (or `perf stat`) of the same job on both sides",
    }
    assert document["made"]["by"] == f"schedwatch {__version__}" and document["made"]["command"] == "compare"


def test_a_saved_v2_report_reads_back_with_its_null_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, out, _ = run(capsys, monkeypatch, "analyze", "--json", *GCP)
    saved = tmp_path / "report.json"
    saved.write_text(out)
    status, again, err = run(capsys, monkeypatch, "analyze", "--json", str(saved))
    assert (status, err) == (0, "")
    assert json.loads(again)["workloads"] == json.loads(out)["workloads"]


def test_dash_reads_standard_input(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pasted = Path(GCP[0]).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(pasted)))
    status, out, err = run(capsys, monkeypatch, "analyze", "--json", "-", GCP[1])
    assert (status, err) == (0, "")
    document = json.loads(out)
    assert document["sources"] == ["perf trace -s stdin", "top gcp_top.txt"]
    assert document["findings"][0]["cause"] == "thread-pool-oversubscription"


def test_dash_is_read_once(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    status, _, err = run(capsys, monkeypatch, "compare", "-", "-")
    assert status == 2
    assert err == "schedwatch compare: standard input (-) can be read once: give it for one side, the other as files\n"
    status, _, err = run(capsys, monkeypatch, "analyze", "-", "-")
    assert status == 2 and "standard input (-) can be read once" in err


def bash_time(job: str, path: Path) -> float:
    """Run *job* under bash's `time` keyword, save what it prints in *path*, and return its real seconds."""
    done = subprocess.run(["bash", "-c", f"time ({job})"], capture_output=True, text=True, check=True)
    path.write_text(done.stderr)
    minutes, seconds = re.search(r"^real\t(\d+)m([\d.]+)s$", done.stderr, re.M).groups()  # type: ignore[union-attr]
    return 60 * int(minutes) + float(seconds)


def test_the_slow_side_is_the_longer_timed_job_where_both_were_timed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`time` of a job on each side says which is slower and by how much: the ratio of the real times printed."""
    slow, fast = tmp_path / "slow_time.txt", tmp_path / "fast_time.txt"
    slow_seconds, fast_seconds = bash_time("sleep 0.6", slow), bash_time("sleep 0.1", fast)
    status, out, _ = run(capsys, monkeypatch, "compare", "--json", str(fast), str(slow))
    assert status == 0
    slower = json.loads(out)["slower"]
    assert slower["side"] == "slow" and slower["factor"] == pytest.approx(slow_seconds / fast_seconds)
    assert slower["basis"] == f"its job's wall time: {slow_seconds:g} s against {fast_seconds:g} s"
    assert slower["would_tell"] == ""


def test_the_readmes_first_command_runs_on_the_files_as_they_ship(tmp_path: Path) -> None:
    """The README's try-it command, run as written by bash from the checkout, answers as the README says."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(schedwatch compare --cpus 32 .*?)```", readme, re.S)
    assert block is not None, "the README's first screen has the seed case's command"
    command = block.group(1).replace("seed.html", str(tmp_path / "seed.html"))
    shell = f'schedwatch() {{ "{sys.executable}" -m agent "$@"; }}\n{command}'
    done = subprocess.run(["bash", "-c", shell], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("schedwatch compare: gcp vs baremetal\n")
    assert "OMP_NUM_THREADS=2" in done.stdout and "gcp is the slow side" in done.stdout
    assert "-e OMP_NUM_THREADS=2" in (tmp_path / "seed.html").read_text(encoding="utf-8")


def test_the_readmes_first_screen_shows_the_offline_install_and_the_command_to_try() -> None:
    """Within the README's first 40 lines: installing as yourself with pip or pipx, or from the wheels `make wheel`
    builds, and the seed case's command on its files as they ship; the root install (`make run`) only after."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    screen = "\n".join(readme.splitlines()[:40])
    for words in ("pipx install .", "bin/pip install .", "make wheel", "pip install --no-index --find-links dist"):
        assert words in screen, words
    assert "schedwatch compare --cpus 32 --workers 14" in screen
    shipped = re.findall(r"tests/unit/fixtures/artifacts/([\w{},]+\.txt)", screen)
    assert shipped, screen
    for name in shipped:  # bash's gcp_{perf_trace_s,top}.txt: each name it expands to
        braces = re.fullmatch(r"(\w*)\{([\w,]+)\}\.txt", name)
        stems = [braces[1] + part for part in braces[2].split(",")] if braces else [name.removesuffix(".txt")]
        for stem in stems:
            assert (REPO / "tests/unit/fixtures/artifacts" / f"{stem}.txt").is_file(), stem
    assert "make run" not in screen and "make run" in readme
    wheel = re.search(r"^wheel:\n\t(.*)$", (REPO / "Makefile").read_text(), re.M)
    assert wheel is not None and "pip wheel --wheel-dir dist ." in wheel.group(1)
