"""`schedwatch top` used as a person would: in a tmux terminal against two live workloads of known yield rates
(tests/workloads/paced_yielder.c), sorted by key presses, quit with q; and its plain lines when piped."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.diagnosis.rules.thresholds import DEFAULT
from tests.support.agent import REPO, AgentProcess, require_root
from tests.support.stalls import Stalls
from tests.support.workloads import CgroupSandbox, Workload, build

SLOW_PER_MS, FAST_PER_MS = 5, 40  # yields at each millisecond: 5,000/s and 40,000/s
INTERVAL = 3.0
# Each reading's time is the middle of a collection that takes up to ~0.2 s with a CPU at hand (so each end of a
# 3 s window is known to +-0.1 s: +-7 %): 15 %; a top that counted wrong (another workload's calls, the wrong
# window) is off by far more. A paced thread that waited for a CPU catches up its missed ticks later, and a top (or
# agent) that waited stamps its reading late: the tolerance widens by the time the kernel says they all waited.
RATE_TOLERANCE = 0.15
YIELD_BAR_PER_CPU = DEFAULT.yields_per_cpu  # the rules' bar for a yield storm


@pytest.fixture(scope="module")
def workloads(cgroups: CgroupSandbox) -> Iterator[tuple[str, str, str, int, int]]:
    """(their common parent cgroup, the slow one's, the fast one's) as top labels them, then the slow and the fast
    process's pids; named so that by name the slow one comes first and by yields the fast one."""
    require_root()
    binary = build("paced_yielder")
    parent = cgroups.make("top")
    slow_dir, fast_dir = parent / "a-slow", parent / "b-fast"
    slow_dir.mkdir()
    fast_dir.mkdir()
    slow = Workload(binary, slow_dir, SLOW_PER_MS)
    fast = Workload(binary, fast_dir, FAST_PER_MS)
    assert slow.truth["yields_per_second"] == 5_000 and fast.truth["yields_per_second"] == 40_000
    try:
        yield cgroups.relative(parent), cgroups.relative(slow_dir), cgroups.relative(fast_dir), slow.pid, fast.pid
    finally:
        slow.release()
        fast.release()
        cgroups.remove(slow_dir)
        cgroups.remove(fast_dir)


@pytest.fixture
def top_cgroup(cgroups: CgroupSandbox) -> Path:
    """A cgroup of its own for the top under test, so that its waits for a CPU are counted apart."""
    return cgroups.make("top-command")


def waits(cgroups: CgroupSandbox, top: Path, *paced: str, agent: AgentProcess | None = None) -> Stalls:
    """The CPU waits, from now on, of the top command's cgroup, the paced yielders' (as top labels them) and the
    agent it reads."""
    dirs = tuple(cgroups.root / name.lstrip("/") for name in paced)
    return Stalls((top, *dirs), () if agent is None else (agent.process.pid,))


def in_cgroup(directory: Path, command: list[str]) -> list[str]:
    """*command* run from a shell that first moves itself into *directory*."""
    return ["sh", "-c", f'echo $$ > {shlex.quote(str(directory / "cgroup.procs"))} && exec "$@"', "sh", *command]


def column(screen: list[str], header: str, row_name: str) -> str:
    """The cell of *row_name*'s line under the right-aligned *header*."""
    (title,) = [line for line in screen if header in line and "WORKLOAD" in line]
    end = title.index(header) + len(header)
    if title[end : end + 1] == "▼":  # the sorted column's mark
        end += 1
    (line,) = [line for line in screen if line.lstrip().startswith(row_name + " ")]
    return line[:end].split()[-1]


def order(screen: list[str], names: tuple[str, ...]) -> list[str]:
    """*names* in the order their rows appear."""
    at = {name: next(i for i, line in enumerate(screen) if line.lstrip().startswith(name + " ")) for name in names}
    return sorted(names, key=at.__getitem__)


class Tmux:
    """A detached tmux session of 200 x 50 running one command."""

    def __init__(self, command: str) -> None:
        self.name = f"schedwatch-top-{uuid.uuid4().hex[:6]}"
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", "200", "-y", "50", command], check=True, cwd=REPO
        )

    def screen(self) -> list[str]:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return out.stdout.splitlines()

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, ready: str, seconds: float) -> list[str]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            screen = self.screen()
            if any(ready in line for line in screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{ready!r} not on the screen within {seconds:g} s:\n" + "\n".join(self.screen()))

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def top_command(parent: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "agent", "top", "--interval", str(INTERVAL), "--cgroup", parent, "--log-level",
        "error", *extra,
    ]  # fmt: skip


def assert_rate(cell: str, expected: float, waited: float) -> None:
    """The rate shown is the one made, within RATE_TOLERANCE and the share of the window the parts *waited*."""
    tolerance = RATE_TOLERANCE + waited / INTERVAL
    shown = float(cell)
    assert abs(shown - expected) <= tolerance * expected, f"{shown}/s shown, {expected:g}/s made, {waited:.3f} s waited"


def test_top_in_a_terminal_shows_the_rates_sorts_by_key_and_quits(
    workloads: tuple[str, str, str, int, int], cgroups: CgroupSandbox, top_cgroup: Path
) -> None:
    parent, slow, fast, *_ = workloads
    # tmux hands the session the COLUMNS and LINES of whoever started it (80 x 24 under pytest): drop them, so top
    # sizes itself by the terminal, 200 x 50, as it would for a person.
    command = "env -u COLUMNS -u LINES " + shlex.join(in_cgroup(top_cgroup, top_command(parent, "--sort", "name")))
    command += "; echo TOP-EXITED $?; sleep 60"
    waited = waits(cgroups, top_cgroup, slow, fast)
    session = Tmux(command)
    try:
        session.wait_for(slow, 120)  # loading the BPF programs takes a while on a busy machine
        time.sleep(INTERVAL + 0.5)  # a window wholly after both workloads started
        screen = session.wait_for(fast, 10)
        assert order(screen, (slow, fast)) == [slow, fast], "\n".join(screen)  # --sort name
        assert_rate(column(screen, "YIELD/s", slow), 5_000, waited.seconds())
        assert_rate(column(screen, "YIELD/s", fast), 40_000, waited.seconds())
        session.keys("y")
        deadline = time.monotonic() + 5
        while order(screen := session.screen(), (slow, fast)) != [fast, slow] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert order(screen, (slow, fast)) == [fast, slow], "\n".join(screen)
        assert any("YIELD/s▼" in line for line in screen)
        session.keys("q")
        ended = session.wait_for("TOP-EXITED", 10)
        assert "TOP-EXITED 0" in "\n".join(ended)
    finally:
        session.kill()


def test_top_piped_prints_one_plain_table_with_once(
    workloads: tuple[str, str, str, int, int], cgroups: CgroupSandbox, top_cgroup: Path
) -> None:
    parent, slow, fast, *_ = workloads
    waited = waits(cgroups, top_cgroup, slow, fast)
    result = subprocess.run(
        in_cgroup(top_cgroup, top_command(parent, "--once", "--sort", "yields")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "schedwatch top: collectors loaded here  sorted by yields"
    assert lines[1].split()[0] == "WORKLOAD"
    rows = {line.split()[0]: line for line in lines[2:]}
    assert [line.split()[0] for line in lines[2:4]] == [fast, slow]  # by yields, the fast one first
    assert_rate(column(lines, "YIELD/s", slow), 5_000, waited.seconds())
    assert_rate(column(lines, "YIELD/s", fast), 40_000, waited.seconds())
    assert set(rows) >= {slow, fast}
    assert all(Path(name).is_relative_to(parent) for name in rows)  # --cgroup: nothing else


def test_top_from_a_running_agent_shows_the_same_rates(
    agent: AgentProcess, workloads: tuple[str, str, str, int, int], cgroups: CgroupSandbox, top_cgroup: Path
) -> None:
    parent, slow, fast, *_ = workloads
    waited = waits(cgroups, top_cgroup, slow, fast, agent=agent)
    result = subprocess.run(
        in_cgroup(top_cgroup, top_command(parent, "--once", "--from", f"http://127.0.0.1:{agent.port}")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"schedwatch top: http://127.0.0.1:{agent.port}  sorted by cpu"
    assert_rate(column(lines, "YIELD/s", slow), 5_000, waited.seconds())
    assert_rate(column(lines, "YIELD/s", fast), 40_000, waited.seconds())


def test_top_with_processes_shows_each_process_under_its_workload(
    agent: AgentProcess, workloads: tuple[str, str, str, int, int], cgroups: CgroupSandbox, top_cgroup: Path
) -> None:
    """In tmux, from the running agent (it exports per-process series: --process-top-k): each paced yielder's
    process row comes right under its workload's row, with the process's own yields per second."""
    parent, slow, fast, slow_pid, fast_pid = workloads
    extra = ("--processes", "--sort", "name", "--from", f"http://127.0.0.1:{agent.port}")
    command = "env -u COLUMNS -u LINES " + shlex.join(in_cgroup(top_cgroup, top_command(parent, *extra)))
    command += "; sleep 60"
    waited = waits(cgroups, top_cgroup, slow, fast, agent=agent)
    session = Tmux(command)
    try:
        screen = session.wait_for(f"{fast_pid} paced_yielder", 30)
        time.sleep(INTERVAL + 0.5)  # a window wholly after both workloads started
        screen = session.wait_for(f"{fast_pid} paced_yielder", 10)
        names = [line.strip().split()[0] for line in screen if line.strip()]
        at = {name: names.index(name) for name in (slow, str(slow_pid), fast, str(fast_pid))}
        assert at[str(slow_pid)] == at[slow] + 1 and at[str(fast_pid)] == at[fast] + 1, "\n".join(screen)
        assert_rate(column(screen, "YIELD/s", str(slow_pid)), 5_000, waited.seconds())
        assert_rate(column(screen, "YIELD/s", str(fast_pid)), 40_000, waited.seconds())
        assert column(screen, "CPU", str(fast_pid)) == "-"  # no per-process CPU series: unknown, not 0
        session.keys("q")
    finally:
        session.kill()


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (("--from", "prometheus+http://127.0.0.1:9"), "schedwatch top: top reads an agent, not a Prometheus"),
        (("--from", "http://127.0.0.1:9"), "schedwatch top: cannot reach http://127.0.0.1:9/metrics"),
    ],
)
def test_a_source_top_cannot_read_is_one_line(arguments: tuple[str, ...], says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "top", "--once", *arguments], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stdout == "", result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(says), line


NUMPY_POOL = REPO / "tests" / "workloads" / "numpy_pool.py"
POOL_WORKERS = 4  # numpy 1.26's OpenBLAS sizes each worker's pool to the machine's CPUs: more threads than CPUs
POOL = "thread-pool-oversubscription"


def finding_of(lines: list[str], name: str) -> set[str]:
    """The causes in the FINDING cell (the last, under its header) of *name*'s row; {"-"} for none."""
    (title,) = [line for line in lines if "FINDING" in line and "WORKLOAD" in line]
    (line,) = [line for line in lines if line.lstrip().startswith(name + " ")]
    return {cause.strip() for cause in line[title.index("FINDING") :].split(",")}


def test_top_judges_the_collectors_it_loads_a_paced_storm_is_named(
    workloads: tuple[str, str, str, int, int],
) -> None:
    """No agent judges the collectors loaded here: top runs the rules on each interval itself, so a workload
    yielding 40,000 times a second (20x the rules' bar per CPU on this 2-CPU machine) has its finding in the
    FINDING column (it showed "-"). Bound by what was counted: its cell names the pool's cause exactly when the
    interval's yields per CPU reach the bar (on a machine busy with other work each yield gives the CPU away, and
    the yielder can fall below it: then its cell is "-"). tests/unit/top/test_top_command.py shows the same on recorded
    series, whatever the machine."""
    parent, _slow, fast, *_ = workloads
    result = subprocess.run(
        top_command(parent, "--once", "--sort", "yields"), cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    storm = float(column(lines, "YIELD/s", fast)) / (os.cpu_count() or 1) >= YIELD_BAR_PER_CPU
    assert (POOL in finding_of(lines, fast)) == storm, "\n".join(lines)


def test_top_beside_a_numpy_yield_storm_names_it_when_its_counts_do(cgroups: CgroupSandbox) -> None:
    """A numpy 1.26 pool whose BLAS pools are sized to every CPU: where the interval's yields reach the rules' bar
    per CPU, its FINDING cell names the pool's cause (never "-"); below it (a machine busy with other work starves
    the spinners) the rules may still name it from its code samples and its wait."""
    require_root()
    from tests.scenarios.catalog import numpy_target

    numpy_126 = {**os.environ, "PYTHONPATH": str(numpy_target("1.26"))}  # pip-installed into tests/.build once
    group = cgroups.make("top-pool")
    path = cgroups.relative(group)
    # Busy for 120 s (no hold): the whole process group is killed when the test is done with it.
    pool = subprocess.Popen(
        [sys.executable, NUMPY_POOL, str(group), str(POOL_WORKERS), "unset", "120s", "0"],
        env=numpy_126,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(3)  # the pool's workers started and their BLAS pools spinning
        result = subprocess.run(
            top_command(path, "--once", "--sort", "yields"), cwd=REPO, capture_output=True, text=True, timeout=180
        )
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        lines = result.stdout.splitlines()
        yields = float(column(lines, "YIELD/s", path))
        assert yields > 0, "\n".join(lines)  # the storm is in the window
        if yields / (os.cpu_count() or 1) >= YIELD_BAR_PER_CPU:
            assert POOL in finding_of(lines, path), "\n".join(lines)
    finally:
        os.killpg(pool.pid, signal.SIGKILL)
        pool.wait()
