"""`schedwatch diagnose` live, against ground truth: CPU used by a cgroup against its threads' own runtime, and the
exact yields of a known workload over the window, read by collectors loaded in-process, from a real agent's
/metrics, and through a real Prometheus scraping that agent (fleet ranking and one node's drill-down)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.diagnosis.inputs.live.fleet import PrometheusSource
from agent.diagnosis.inputs.live.sources import SourceError
from agent.machine.cgroups.cpu import read_usage_v1
from agent.machine.cgroups.layout import read_layout
from tests.support.agent import REPO, AgentProcess
from tests.support.diagnose import Diagnose
from tests.support.prometheus import Prometheus
from tests.support.schemas import assert_valid
from tests.support.scrape import scrape
from tests.support.workloads import CgroupSandbox, Workload, build

YIELDS_PER_THREAD = 100_000
THREADS = 2
WINDOW = 6  # seconds: room for the yields (~0.3 s) after the window opens, on a loaded machine


def runtime_ns(pid: int) -> int:
    """CPU time of every thread of *pid* so far, from the scheduler's own accounting (schedstat, ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[0])
    return total


def test_cpu_usage_matches_the_runtime_of_the_cgroups_threads(
    agent: AgentProcess, cgroups: CgroupSandbox, spinner: Path
) -> None:
    v2 = cgroups.make("burn")
    dirs = str(v2)
    cpuacct = None
    if "cpuacct" in cgroups.v1:  # hybrid host: the v1 cpuacct reader is checked on the same burner
        cpuacct = cgroups.make_v1("cpuacct", cgroups.relative(v2))
        dirs = f"{v2}:{cpuacct}"
    # Two threads burn 1.5 s of wall time each, then park: all their CPU time is accounted by the scrape.
    workload = Workload(spinner, dirs, 2, 1.5, -1)
    try:
        truth = runtime_ns(workload.pid) / 1e9
        exported = scrape(agent.url, timeout=60)
        labels = {"cgroup": cgroups.relative(v2), "container_id": ""}
        user = exported.value("schedwatch_cpu_usage_seconds_total", mode="user", **labels)
        system = exported.value("schedwatch_cpu_usage_seconds_total", mode="system", **labels)
        assert user is not None and system is not None, f"no schedwatch_cpu_usage_seconds_total for {labels}"
        # The process joins the cgroup first thing: only its exec and start-up (well under 20 ms) ran outside.
        # The kernel splits user/system by ticks scaled to the exact runtime, so their sum is exact.
        assert truth - 0.02 <= user + system <= truth + 0.001, (user, system, truth)
        assert truth > 0.1, f"the burner ran only {truth:.2f} s of CPU: nothing to compare"
        assert user / (user + system) > 0.9  # a busy loop in user space
        if cpuacct is not None:
            root = read_layout().v1["cpuacct"]
            usage = read_usage_v1(root, cgroups.relative(v2))
            assert usage is not None
            v1_total = (usage.user_ns + usage.system_ns) / 1e9
            assert truth - 0.02 <= v1_total <= truth + 0.001, (v1_total, truth)
    finally:
        workload.release()


def only_workload(report: dict[str, Any], cgroup: str) -> dict[str, Any]:
    found = [w for w in report["workloads"] if w["ref"]["cgroup"] == cgroup]
    assert len(found) == 1, f"{cgroup} is not among {[w['ref'] for w in report['workloads']]}"
    return found[0]


def test_diagnose_in_process_counts_the_exact_yields(cgroups: CgroupSandbox, yielder: Path, tmp_path: Path) -> None:
    group = cgroups.make("scope")  # the filter names the parent; the yielder's cgroup is made below it later
    diagnose = Diagnose("--duration", str(WINDOW), "--cgroup", cgroups.relative(group), "--state-dir", str(tmp_path))
    inner = group / "work"
    opened = diagnose.wait_for_window()
    inner.mkdir()
    workload = Workload(yielder, inner, YIELDS_PER_THREAD, THREADS)
    assert time.monotonic() - opened < WINDOW - 1.5
    try:
        report = diagnose.result()
        view = only_workload(report, cgroups.relative(inner))
        assert view["sched_yield_calls"] == YIELDS_PER_THREAD * THREADS
        # syscall_families, off in `run`, is on for diagnose's one-off measurement unless asked not to.
        assert view["syscall_calls_by_family"] is not None, "diagnose did not count system calls by family"
        assert view["syscall_calls_by_family"]["yield"] == YIELDS_PER_THREAD * THREADS
        assert [p["pid"] for p in view["processes"]] == [workload.pid]
        assert report["sources"] == ["bpf (collectors loaded by diagnose)"]
        assert report["node"]["cpus"] == os.cpu_count()
    finally:
        workload.release()
        cgroups.remove(inner)


def test_diagnose_from_an_agent_counts_the_exact_yields_and_reads_the_process(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path, sleeper: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quiet_group = cgroups.make("quiet")
    quiet = Workload(sleeper, quiet_group, 1, 1000)  # in the window too, but shows no contention
    diagnose = Diagnose("--duration", str(WINDOW), "--from", f"http://127.0.0.1:{agent.port}")
    group = cgroups.make("diagnose")
    opened = diagnose.wait_for_window()
    # The yielder's environment: one allow-listed thread variable, and a secret that must never come out.
    canary = f"schedwatch-canary-{os.urandom(8).hex()}"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("SCHEDWATCH_TEST_SECRET", canary)
    workload = Workload(yielder, group, YIELDS_PER_THREAD, THREADS)  # returns once every yield is made
    monkeypatch.delenv("SCHEDWATCH_TEST_SECRET")
    done = time.monotonic() - opened
    assert done < WINDOW - 1.5, f"the yields took until {done:.1f} s into a {WINDOW} s window"
    try:
        report = diagnose.result()
        view = only_workload(report, cgroups.relative(group))
        assert view["sched_yield_calls"] == YIELDS_PER_THREAD * THREADS
        # The readings are WINDOW s apart, each timed at the middle of its scrape (seconds on a busy agent).
        assert view["seconds"] >= WINDOW - 1.0
        (process,) = view["processes"]  # flagged by its yields, so read closely
        assert process["pid"] == workload.pid and process["comm"] == "yielder"
        assert process["threads"] == 1  # its yielding threads have exited; the main thread holds
        assert process["environment"] == [["OMP_NUM_THREADS", "3"]]
        assert canary not in diagnose.output
        assert view["libraries"] == []
        # Not flagged: its processes, maps and environment were not read.
        assert only_workload(report, cgroups.relative(quiet_group))["processes"] is None
        assert report["sources"] == [f"agent http://127.0.0.1:{agent.port}/metrics"]
    finally:
        workload.release()
        quiet.release()


@pytest.fixture(scope="module")
def prometheus(agent: AgentProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{agent.port}"])
    yield server
    server.stop()


def wait_for_value(prometheus: Prometheus, expr: str, value: float, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = prometheus.query(expr)
        if result and float(result[0]["value"][1]) == value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{expr} is {result}, not {value}, after {timeout} s")
        time.sleep(0.5)


def run_cli(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", "diagnose", *flags], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_fleet_ranking_and_node_drill_down_through_prometheus(
    agent: AgentProcess, prometheus: Prometheus, cgroups: CgroupSandbox, yielder: Path
) -> None:
    group = cgroups.make("fleet")
    path = cgroups.relative(group)
    series = f'schedwatch_sched_yield_calls_total{{cgroup="{path}"}}'
    first = Workload(yielder, group, 1, 1)  # the series exists (at 1) before the storm
    wait_for_value(prometheus, f"count_over_time({series}[1m])", 3)
    storm = Workload(yielder, group, 500_000, THREADS)
    total = 500_000 * THREADS
    try:
        wait_for_value(prometheus, series, total + 1)
        time.sleep(2)
        url = f"prometheus+{prometheus.url}"
        ranked = run_cli("--from", url, "--duration", "120", "--json")
        assert ranked.returncode == 0, ranked.stderr
        ranking = json.loads(ranked.stdout)
        assert ranking["schema"] == "schedwatch.fleet/v1"
        assert_valid(ranking)
        instance = f"127.0.0.1:{agent.port}"
        assert ranking["nodes"] == [instance]
        rows = [row for row in ranking["workloads"] if row["workload"]["cgroup"] == path]
        assert len(rows) == 1, ranking["workloads"]
        assert rows[0]["instance"] == instance
        assert rows[0]["score"] >= 1  # a storm: past the rules' yield threshold
        # The rate is over the part of the window the workload's series cover (it is younger than the window).
        covered = rows[0]["seconds"]
        assert 0 < covered < 120, rows[0]
        # Exactly the storm's yields (and the first 1, when its first sample is in the range): no extrapolation.
        assert rows[0]["sched_yield_per_second"] * covered == pytest.approx(total, abs=1.5), rows[0]

        drilled = run_cli("--from", url, "--node", "127.0.0.1", "--duration", "120", "--json", "--cgroup", path)
        assert drilled.returncode == 0, drilled.stderr
        report = json.loads(drilled.stdout)
        assert_valid(report)
        view = only_workload(report, path)
        assert view["sched_yield_calls"] in (total, total + 1), view
        assert view["processes"] is None  # Prometheus has no processes: the notes say where to get them
        assert any("run `schedwatch diagnose` on that node" in note for note in report["notes"])

        missing = run_cli("--from", url, "--node", "no-such-node", "--duration", "60")
        assert missing.returncode == 2
        assert missing.stderr.strip().splitlines() == [
            f"schedwatch diagnose: {prometheus.url} has no schedwatch series for a node named 'no-such-node': "
            "is it scraping the agents (job with port 17953)? Leave out --node to list the nodes it has."
        ]
    finally:
        storm.release()
        first.release()


def test_a_query_prometheus_refuses_is_its_own_one_line_error(prometheus: Prometheus) -> None:
    with pytest.raises(SourceError) as refused:
        PrometheusSource(f"prometheus+{prometheus.url}").query("sum(")
    (line,) = str(refused.value).splitlines()
    assert line.startswith(f"{prometheus.url} refused a query (HTTP 400): "), line
    assert "parse error" in line, line  # Prometheus's own reason, from its JSON answer


WITHOUT_BPF = {
    "no BPF capabilities": ("--bounding-set", "-bpf,-perfmon,-sys_admin"),
    "not root": ("--reuid=65534", "--regid=65534", "--clear-groups"),
}


@pytest.mark.parametrize("who", sorted(WITHOUT_BPF))
def test_without_bpf_diagnose_falls_back_to_proc_and_says_so(who: str, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    command = [sys.executable, "-m", "agent", "diagnose", "--json", "--duration", "1", "--state-dir", str(tmp_path)]
    result = subprocess.run(
        ["setpriv", *WITHOUT_BPF[who], *command, "--log-level", "error"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert_valid(report)
    assert report["sources"] == ["procfs (collectors loaded by diagnose)"]
    assert "collectors not running: syscalls (their counts are unknown, not zero)" in report["notes"]


@pytest.mark.parametrize("who", sorted(WITHOUT_BPF))
def test_without_bpf_diagnose_in_bpf_mode_says_to_read_an_agent(who: str, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    command = [sys.executable, "-m", "agent", "diagnose", "--mode", "bpf", "--duration", "1"]
    result = subprocess.run(
        ["setpriv", *WITHOUT_BPF[who], *command, "--state-dir", str(tmp_path), "--log-level", "error"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    said = "schedwatch diagnose: no collector can count here in bpf mode (syscalls, sched, syscall_families, oncpu: "
    assert line.startswith(said), line
    assert "missing CAP_BPF" in line, line
    assert line.endswith("read a running agent instead: schedwatch diagnose --from http://127.0.0.1:17953")


def test_the_agent_exports_a_finding_of_the_other_causes_too(agent: AgentProcess, cgroups: CgroupSandbox) -> None:
    """A thread reading the clock through syscall(2) (about 2 M reads/s here, 64 % of its CPU in the kernel) on this
    node's tsc: the agent's own evaluation names clock-reads-as-syscalls/vdso-bypassed from its series alone (the
    clock calls by family, its CPU by mode, the node's clock source read at start)."""
    group = cgroups.make("standing-clock")
    path = cgroups.relative(group)
    wanted = {"cgroup": path, "cause": "clock-reads-as-syscalls", "mechanism": "vdso-bypassed"}
    reader = subprocess.Popen(
        [str(build("clock_reader")), str(group), "90", "syscall", "50"], stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60  # an evaluation every 10 s; two are needed (a window between them)
        while scrape(agent.url, timeout=60).value("schedwatch_finding", **wanted) is None:
            assert time.monotonic() < deadline, "no clock-reads finding within 60 s of the reads"
            assert reader.poll() is None, f"clock_reader ended early ({reader.returncode})"
            time.sleep(1)
    finally:
        reader.kill()
        reader.wait()


def test_the_agent_exports_a_finding_while_it_stands(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    group = cgroups.make("standing")
    path = cgroups.relative(group)
    wanted = {"cgroup": path, "cause": "thread-pool-oversubscription", "mechanism": "yield-storm"}

    def finding() -> float | None:
        return scrape(agent.url, timeout=60).value("schedwatch_finding", **wanted)

    assert finding() is None
    # 1,000,000 yields land in one evaluation window of 10-12 s: >= 40,000/s per CPU, far past the rules' bar.
    storm = Workload(yielder, group, 500_000, THREADS)
    try:
        deadline = (
            time.monotonic() + 60
        )  # an evaluation every 10 s; scrapes took seconds here while a soak churned 1,000 cgroups
        while finding() is None:
            assert time.monotonic() < deadline, "no schedwatch_finding within 60 s of a yield storm"
            time.sleep(1)
        assert finding() == 1
        deadline = time.monotonic() + 60  # the next window has no yields: the finding goes
        while finding() is not None:
            assert time.monotonic() < deadline, "schedwatch_finding still there 60 s after the storm"
            time.sleep(1)
        assert scrape(agent.url, timeout=60).find("schedwatch_finding", cgroup=path) == {}
    finally:
        storm.release()
