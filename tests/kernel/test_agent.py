"""The agent as a whole: exposition format, self-metrics, bounded maps, degraded start, clean shutdown."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.agent import REPO, AgentProcess
from tests.support.workloads import CgroupSandbox, Workload


def test_exposition_passes_promtool(agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus"
    Workload(yielder, cgroups.make("promtool"), 10, 1, hold=False)
    text = agent.scrape().text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr


def test_bpf_program_self_metrics_count_runs(agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path) -> None:
    labels = {"collector": "syscalls", "program": "sys_enter_sched_yield"}
    before = agent.scrape()
    assert before.value("schedwatch_bpf_stats_enabled") == 1
    runs_before = before.value("schedwatch_bpf_program_runs_total", **labels)
    assert runs_before is not None
    Workload(yielder, cgroups.make("selfstats"), 50_000, 1, hold=False)
    after = agent.scrape()
    runs = after.value("schedwatch_bpf_program_runs_total", **labels) - runs_before
    seconds = after.value("schedwatch_bpf_program_run_seconds_total", **labels) - before.value(
        "schedwatch_bpf_program_run_seconds_total", **labels
    )
    assert runs >= 50_000  # other processes on the machine may yield too
    assert 0 < seconds / runs < 5e-6, f"{seconds / runs * 1e9:.0f} ns per run is implausible"
    assert after.value("schedwatch_source_up", source="syscalls") == 1
    assert after.value("schedwatch_bpf_map_max_entries", collector="syscalls", map="cgroups") == 4096


def test_full_map_drops_are_counted_not_silent(cgroups: CgroupSandbox, yielder: Path, tmp_path: Path) -> None:
    small = AgentProcess(tmp_path / "agent.log", "--max-cgroups", "2", "--state-dir", str(tmp_path))
    try:
        small.wait_ready()
        for index in range(4):
            Workload(yielder, cgroups.make(f"full{index}"), 100, 1, hold=False)
        scrape = small.scrape()
        assert scrape.value("schedwatch_bpf_map_entries", collector="syscalls", map="cgroups") <= 2
        assert scrape.value("schedwatch_bpf_events_dropped_total", collector="syscalls", map="cgroups") >= 100
    finally:
        assert small.stop() == 0


def test_missing_headers_degrade_the_collector_not_the_agent(tmp_path: Path) -> None:
    env = dict(os.environ, BCC_KERNEL_SOURCE=str(tmp_path / "no-headers-here"))
    agent = AgentProcess(tmp_path / "agent.log", "--mode", "bpf", "--state-dir", str(tmp_path), env=env)
    try:
        agent.wait_ready()
        scrape = agent.scrape()
        assert scrape.value("schedwatch_source_up", source="syscalls") == 0
        assert scrape.value("schedwatch_build_info") == 1
        assert "has no include/linux/kconfig.h" in agent.log()
    finally:
        assert agent.stop() == 0


def loaded_program_ids(pid: int) -> set[int]:
    """Ids of the BPF programs a process holds open, from its fdinfo."""
    ids = set()
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            text = fdinfo.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("prog_id:"):
                ids.add(int(line.split()[1]))
    return ids


def test_sigint_detaches_every_program(tmp_path: Path) -> None:
    bpftool = shutil.which("bpftool")
    assert bpftool, "bpftool is missing: apt-get install bpftool"
    agent = AgentProcess(tmp_path / "agent.log", "--state-dir", str(tmp_path))
    agent.wait_ready()
    programs = loaded_program_ids(agent.process.pid)
    assert len(programs) >= 4, "the agent's programs are not loaded"
    for program in programs:
        subprocess.run([bpftool, "prog", "show", "id", str(program)], check=True, capture_output=True)
    agent.process.send_signal(signal.SIGINT)
    assert agent.process.wait(30) == 0
    for program in programs:
        shown = subprocess.run([bpftool, "prog", "show", "id", str(program)], capture_output=True)
        assert shown.returncode != 0, f"program {program} is still loaded after exit"
    assert '"event": "stopped"' in agent.log()


def test_check_reports_a_runnable_collector() -> None:
    result = subprocess.run([sys.executable, "-m", "agent", "check"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    for collector in ("syscalls", "sched", "cgroup_cpu"):
        assert f"  {collector:<16} ok" in result.stdout
    assert "headers" in result.stdout and "MISSING" not in result.stdout


def test_check_says_what_to_do_when_headers_are_missing(tmp_path: Path) -> None:
    env = dict(os.environ, BCC_KERNEL_SOURCE=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-m", "agent", "check", "--state-dir", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "syscalls         CANNOT RUN: no kernel headers — fix: BCC_KERNEL_SOURCE=" in result.stdout


def test_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "agent",
                "run",
                "--listen",
                f"127.0.0.1:{port}",
                "--log-level",
                "error",
                "--state-dir",
                str(tmp_path),
                "--no-collector.syscalls",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert (
        f"schedwatch: cannot listen on 127.0.0.1:{port}: Address already in use; choose another --listen"
        in result.stderr
    )


def test_a_burst_of_stop_signals_still_stops_the_agent(tmp_path: Path) -> None:
    # `kill` of a process group and a shell's trap deliver SIGTERM twice, close together: the second one lands
    # while the first one's handler runs. The agent must stop all the same.
    agent = AgentProcess(tmp_path / "agent.log", "--state-dir", str(tmp_path))
    agent.wait_ready()
    for _ in range(200):
        agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(30) == 0, agent.log()
    assert '"event": "stopped"' in agent.log()


def test_check_says_why_a_runtime_socket_in_an_unsearchable_directory_cannot_be_reached(tmp_path: Path) -> None:
    # containerd may leave /run/containerd at mode 0600; the DaemonSet's root has no CAP_DAC_OVERRIDE to pass it.
    import socket

    hidden = tmp_path / "containerd"
    hidden.mkdir()
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(hidden / "containerd.sock"))
        listening.listen()
        hidden.chmod(0o600)
        without_dac = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all"]
        check = [*without_dac, sys.executable, "-m", "agent", "check", "--no-load"]
        result = subprocess.run(
            [*check, "--runtime.containerd-socket", str(hidden / "containerd.sock")],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert (
        f"{hidden / 'containerd.sock'}: not reachable: permission denied (without CAP_DAC_OVERRIDE the agent needs "
        f"search permission on each directory above the socket: chmod o+x {hidden}, or mount the socket file itself)"
    ) in result.stdout, result.stdout
