"""`schedwatch verify -- CMD ...`: run a command as it is, then with the thread-pool fix, and say if the fix helps.

Each run gets a fresh cgroup of its own; the BPF programs (loaded in this process, as ``schedwatch run`` loads them)
count that cgroup's yields, futex calls, futex wait, run-queue wait and preempted time exactly, and the cgroup's
cpu.stat gives its user and system CPU. The fix is the thread variables set to the count a diagnosis of the first
run recommends; when the first run gave nothing to diagnose (it was too short, or no pool was found), to
max(1, CPUs it may use / pool workers), or 1 per process when no pool of workers was seen.

Exit status: 0 the fix helps, 1 it does not, 2 usage error, 3 the runs could not be measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent import bpf, kernel, log
from agent.cgroups import parse_flat_keyed, read_layout
from agent.diagnosis import rules
from agent.diagnosis.facts import WorkloadFacts, gather_workload
from agent.diagnosis.findings import Cause, Diagnosis
from agent.diagnosis.views import Facts, LibraryView, NodeView, PoolView, ProcessView, WorkloadRef, WorkloadView
from agent.facts import gather
from agent.probes.base import ProbeLimits
from agent.probes.sched import SchedProbe
from agent.probes.syscalls import FUTEX_OPS, SyscallProbe
from agent.procfs import ProcFS

# Thread-count variables of the common pool libraries; the fix sets each to the same count.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
MIN_SPEEDUP = 1.05  # the fix helps when the wall time falls by at least 5 % ...
# ... or, wall time no worse than this, when the contention it removes was real and is mostly gone.
MAX_SLOWDOWN = 0.95
CONTENTION_GONE = 0.5  # run-queue wait and yields: at most half of what they were
YIELDS_PER_SECOND_REAL = 1_000.0
RUNQ_PER_SECOND_REAL = 0.1  # seconds of run-queue wait per second of wall time
FACTS_AFTER_SECONDS = 1.0  # when the first run's processes are read (pools have started by then)
FACTS_INTERVAL_SECONDS = 0.5
DEFAULT_LIMIT_SECONDS = 600.0
PERIOD_US = 100_000
USAGE = 2
UNMEASURED = 3


class VerifyError(Exception):
    """The runs cannot be measured here; the message says what to do."""


@dataclass(frozen=True)
class Counts:
    """What the BPF programs counted for one cgroup; None where its map held no entry (never ran)."""

    sched_yield_calls: int
    futex_calls: dict[str, int]
    futex_wait_seconds: float
    runqueue_wait_seconds: float | None
    preempted_seconds: float | None


@dataclass(frozen=True)
class Run:
    """One run of the command."""

    label: str  # "as is" or "fixed"
    repeat: int  # 1, 2, ... (--repeat)
    variables: dict[str, str]  # thread variables set for this run (empty: as it is)
    exit_status: int | None  # None: stopped at the duration limit
    wall_seconds: float
    user_seconds: float
    system_seconds: float
    counts: Counts
    threads_seen: int  # the most threads its cgroup held when read

    @property
    def stopped(self) -> bool:
        """Stopped at the duration limit: its wall time is a lower bound."""
        return self.exit_status is None

    @property
    def futex_total(self) -> int:
        return sum(self.counts.futex_calls.values())


@dataclass(frozen=True)
class Recommendation:
    """The variables of the fix and where their value came from."""

    variables: dict[str, str]
    source: str  # how the count was chosen, in words
    finding: str | None = None  # cause/mechanism of the diagnosis the count came from


@dataclass(frozen=True)
class Verdict:
    """Whether the fix helps, and why."""

    helps: bool
    speedup: float | None  # as-is wall / fixed wall; a lower bound when the first run was stopped
    speedup_is_lower_bound: bool
    reason: str


@dataclass(frozen=True)
class Report:
    """Both runs, the fix, and the verdict."""

    command: list[str]
    cpus: float
    recommendation: Recommendation
    runs: list[Run]  # every run, in the order they ran
    as_is: Run  # the one compared: the median wall time of its side
    fixed: Run
    verdict: Verdict


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `verify` on the `schedwatch` subcommand parser."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "verify",
        help="run a command as it is and with the thread-pool fix, and compare",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--duration-limit",
        type=float,
        default=DEFAULT_LIMIT_SECONDS,
        metavar="S",
        help=f"stop each run after S seconds (default {DEFAULT_LIMIT_SECONDS:g})",
    )
    parser.add_argument("--cpus", type=float, metavar="N", help="run both under a CPU quota of N CPUs")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each side N times, alternating, and compare the runs of median wall time (a noisy machine)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON (the command's output to stderr)")
    parser.add_argument("--state-dir", type=Path, default=Path("/run/schedwatch"), help="where kernel headers are kept")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG ...]")
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Run `schedwatch verify`; returns the exit status."""
    log.configure("warning", "auto")  # the command's output and the report are what a person reads
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    problem = _usage_problem(command, args.duration_limit, args.cpus, args.repeat)
    if problem:
        print(f"schedwatch verify: {problem}", file=sys.stderr)
        return USAGE
    try:
        report = verify(command, args.duration_limit, args.cpus, args.state_dir, args.json, args.repeat)
    except VerifyError as error:
        print(f"schedwatch verify: {error}", file=sys.stderr)
        return UNMEASURED
    except FileNotFoundError as error:
        print(
            f"schedwatch verify: cannot run {command[0]!r}: {error.strerror}; give a command on PATH", file=sys.stderr
        )
        return USAGE
    if args.json:
        print(json.dumps(to_json(report), indent=2))
    else:
        print(to_text(report))
    return 0 if report.verdict.helps else 1


def _usage_problem(command: list[str], limit: float, cpus: float | None, repeat: int) -> str | None:
    if not command:
        return "no command: schedwatch verify [--duration-limit S] -- CMD [ARG ...]"
    if not (limit > 0 and math.isfinite(limit)):
        return f"--duration-limit must be a number of seconds above 0, not {limit:g}"
    if cpus is not None and not (0.01 <= cpus <= 4096):
        return f"--cpus must be between 0.01 and 4096, not {cpus:g}"
    if not 1 <= repeat <= 20:
        return f"--repeat must be between 1 and 20, not {repeat}"
    return None


def verify(
    command: list[str], limit: float, quota: float | None, state_dir: Path, quiet: bool, repeat: int = 1
) -> Report:
    """Run *command* as it is, choose the fix from that run, run it fixed, and compare; with *repeat* > 1 the two
    alternate that many times and the run of median wall time of each side is compared."""
    if os.geteuid() != 0:
        raise VerifyError("needs root (it makes cgroups and loads BPF programs): run it with sudo")
    output = sys.stderr if quiet else None
    runs: list[Run] = []
    with Counters.loaded(state_dir) as counters, Cgroups.made(quota) as cgroups:
        cpus = cgroups.cpus_allowed()
        first, facts = run_once("as is", 1, command, {}, counters, cgroups, limit, output, read_facts=True)
        recommendation = recommend(first, facts, cpus, quota)
        runs.append(first)
        for index in range(1, repeat + 1):
            if index > 1:
                runs.append(run_once("as is", index, command, {}, counters, cgroups, limit, output)[0])
            fixed = run_once("fixed", index, command, recommendation.variables, counters, cgroups, limit, output)[0]
            runs.append(fixed)
    as_is, fixed = median_run(runs, "as is"), median_run(runs, "fixed")
    return Report(command, cpus, recommendation, runs, as_is, fixed, judge(as_is, fixed))


def median_run(runs: list[Run], label: str) -> Run:
    """The run of *label* whose wall time is the median (the lower middle one of an even count)."""
    chosen = sorted((run for run in runs if run.label == label), key=lambda run: run.wall_seconds)
    return chosen[(len(chosen) - 1) // 2]


class Counters:
    """The syscalls and sched BPF programs, loaded in this process."""

    def __init__(self, syscalls: SyscallProbe, sched: SchedProbe) -> None:
        self._syscalls = syscalls
        self._sched = sched

    @classmethod
    @contextlib.contextmanager
    def loaded(cls, state_dir: Path) -> Iterator[Counters]:
        """Mount tracefs and lay out kernel headers where needed, load both programs; detach them at the end."""
        tracefs = kernel.tracefs_root()
        if tracefs is None:
            try:
                tracefs = kernel.mount_tracefs()
            except OSError as error:
                raise VerifyError(f"{error}; mount it: mount -t tracefs tracefs /sys/kernel/tracing") from error
        facts = gather()
        if facts.headers is None:
            raise VerifyError(facts.headers_error)
        try:
            kernel.prepare_headers(facts.headers, state_dir)
        except OSError as error:
            raise VerifyError(
                f"cannot prepare kernel headers in {state_dir}: {error}; pass a writable --state-dir"
            ) from error
        limits = ProbeLimits()
        try:
            syscalls = SyscallProbe(limits, tracefs)
        except bpf.BpfUnavailable as error:
            raise VerifyError(f"{error} (`schedwatch check` says what this machine allows)") from error
        try:
            sched = SchedProbe(limits, tracefs)
        except bpf.BpfUnavailable as error:
            syscalls.close()
            raise VerifyError(f"{error} (`schedwatch check` says what this machine allows)") from error
        try:
            yield cls(syscalls, sched)
        finally:
            syscalls.close()
            sched.close()

    def read(self, cgroup_id: int) -> Counts:
        """The counts of a cgroup made empty for one run: no map entry means no event counted yet."""
        calls = self._syscalls.read().cgroups.get(cgroup_id)
        sched = self._sched.read().cgroups.get(cgroup_id)
        futex = dict.fromkeys(FUTEX_OPS, 0)
        if calls is not None:
            futex = dict(zip(FUTEX_OPS, calls.counts.futex_calls, strict=True))
        return Counts(
            sched_yield_calls=calls.counts.yields if calls else 0,
            futex_calls=futex,
            futex_wait_seconds=calls.counts.futex_wait_ns / 1e9 if calls else 0.0,
            runqueue_wait_seconds=sched.counts.runq_ns / 1e9 if sched else None,
            preempted_seconds=sched.counts.offcpu_ns[0] / 1e9 if sched else None,
        )


class Cgroups:
    """Where the runs go: a parent cgroup of this verify (with the quota, if any), a fresh child per run."""

    def __init__(self, unified: Path, cpu_v1: Path | None, quota: float | None) -> None:
        name = f"schedwatch-verify-{os.getpid()}"
        self.parent = unified / name
        self.parent.mkdir()
        self.cpu_parent: Path | None = None
        self.quota = quota
        if quota is not None:
            if cpu_v1 is not None:  # hybrid host: the quota lives in the v1 cpu hierarchy
                self.cpu_parent = cpu_v1 / name
                self.cpu_parent.mkdir()
                (self.cpu_parent / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.cpu_parent / "cpu.cfs_quota_us").write_text(str(round(quota * PERIOD_US)))
            else:
                controllers = (unified / "cgroup.subtree_control").read_text().split()
                if "cpu" not in controllers:
                    raise VerifyError(f"--cpus needs the cpu controller: echo +cpu > {unified}/cgroup.subtree_control")
                (self.parent / "cgroup.subtree_control").write_text("+cpu")
                (self.parent / "cpu.max").write_text(f"{round(quota * PERIOD_US)} {PERIOD_US}")
        self._made: list[Path] = []

    @classmethod
    @contextlib.contextmanager
    def made(cls, quota: float | None) -> Iterator[Cgroups]:
        layout = read_layout()
        if layout.unified is None:
            raise VerifyError(
                "needs a cgroup2 mount to count a run apart: mount -t cgroup2 none /sys/fs/cgroup/unified"
            )
        cgroups = cls(layout.unified, layout.v1.get("cpu"), quota)
        try:
            yield cgroups
        finally:
            cgroups.remove()

    def cpus_allowed(self) -> float:
        """CPUs a run may use: this process's affinity, or the quota when it is tighter."""
        cpus = float(len(os.sched_getaffinity(0)))
        return cpus if self.quota is None else min(cpus, self.quota)

    def fresh(self, label: str) -> list[Path]:
        """A new, empty cgroup for one run: its cgroup2 directory first, then its v1 cpu one (if any)."""
        slug = label.replace(" ", "-")
        dirs = [self.parent / slug]
        if self.cpu_parent is not None:
            dirs.append(self.cpu_parent / slug)
        for directory in dirs:
            directory.mkdir()
            self._made.append(directory)
        return dirs

    def remove(self) -> None:
        """Empty and remove every cgroup made, children first."""
        for directory in [*reversed(self._made), *filter(None, (self.cpu_parent, self.parent))]:
            with contextlib.suppress(FileNotFoundError):
                kill_all(directory)
                _rmdir(directory)


def kill_all(directory: Path, timeout: float = 10.0) -> None:
    """SIGKILL every process of a cgroup until none is left."""
    deadline = time.monotonic() + timeout
    while pids := (directory / "cgroup.procs").read_text().split():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        if time.monotonic() > deadline:
            raise VerifyError(f"processes {', '.join(pids)} of {directory} survive SIGKILL")
        time.sleep(0.02)


def _rmdir(directory: Path, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            directory.rmdir()
            return
        except OSError:  # busy: exited processes linger a moment
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _joiner(dirs: list[Path]) -> Callable[[], None]:
    """Runs in the child between fork and exec: moves it into the run's cgroups, so all it starts is counted."""
    procs = [str(directory / "cgroup.procs") for directory in dirs]

    def join() -> None:
        for path in procs:
            with open(path, "w") as file:
                file.write(str(os.getpid()))

    return join


def run_once(
    label: str,
    repeat: int,
    command: list[str],
    variables: dict[str, str],
    counters: Counters,
    cgroups: Cgroups,
    limit: float,
    output: Any,
    read_facts: bool = False,
) -> tuple[Run, WorkloadFacts | None]:
    """Run *command* with *variables* set in a fresh cgroup until it exits or *limit* seconds pass."""
    dirs = cgroups.fresh(f"{label}-{repeat}")
    unified = dirs[0]
    cgroup_id = unified.stat().st_ino
    environment = {**os.environ, **variables}
    before_cpu = _cpu_stat(unified)
    started = time.monotonic()
    process = subprocess.Popen(command, env=environment, preexec_fn=_joiner(dirs), stdout=output)
    ended: list[float] = []  # when it exited, noted by a thread of its own: reading facts must not delay it
    waiter = threading.Thread(target=lambda: ended.append((process.wait(), time.monotonic())[1]), daemon=True)
    waiter.start()
    facts: WorkloadFacts | None = None
    threads = 0
    while not ended:
        waiter.join(timeout=0.1)
        elapsed = time.monotonic() - started
        threads = max(threads, _threads(unified))
        if elapsed >= limit:
            break
        if read_facts and facts is None and elapsed >= FACTS_AFTER_SECONDS and not ended:
            facts = gather_workload(ProcFS(), _pids(unified), FACTS_INTERVAL_SECONDS)
    exit_status = process.returncode if ended else None
    wall = (ended[0] if ended else time.monotonic()) - started
    kill_all(unified)  # what it left running (daemons), or all of it at the limit
    process.wait()
    after_cpu = _cpu_stat(unified)
    counts = counters.read(cgroup_id)
    user = (after_cpu.get("user_usec", 0) - before_cpu.get("user_usec", 0)) / 1e6
    system = (after_cpu.get("system_usec", 0) - before_cpu.get("system_usec", 0)) / 1e6
    return Run(label, repeat, variables, exit_status, wall, user, system, counts, threads), facts


def _cpu_stat(unified: Path) -> dict[str, int]:
    return parse_flat_keyed((unified / "cpu.stat").read_text())


def _pids(unified: Path) -> list[int]:
    return [int(pid) for pid in (unified / "cgroup.procs").read_text().split()]


def _threads(unified: Path) -> int:
    try:
        return len((unified / "cgroup.threads").read_text().split())
    except OSError:
        return 0


def recommend(first: Run, facts: WorkloadFacts | None, cpus: float, quota: float | None) -> Recommendation:
    """The thread variables to set: from a diagnosis of the first run, else CPUs / pool workers, else 1."""
    if facts is not None:
        diagnosis = rules.diagnose(_facts_of(first, facts, cpus, quota))
        for finding in diagnosis.findings:
            variables = dict(finding.fix.variables)
            if finding.cause is Cause.THREAD_POOL_OVERSUBSCRIPTION and variables:
                count = next(iter(variables.values()))
                return Recommendation(
                    {name: count for name in THREAD_VARIABLES},
                    f"the diagnosis of the first run: {finding.fix.summary}",
                    f"{finding.cause.value}/{finding.mechanism.value}",
                )
        workers = max((pool.size for pool in facts.pools), default=0)
        if workers:
            threads = max(1, math.floor(cpus / workers))
            return Recommendation(
                dict.fromkeys(THREAD_VARIABLES, str(threads)),
                f"no pool finding in the first run; {cpus:g} CPUs / {workers} pool workers = {threads} per process",
                _names(diagnosis),
            )
        return Recommendation(
            dict.fromkeys(THREAD_VARIABLES, "1"),
            "no pool finding and no pool of workers in the first run: 1 thread per process",
            _names(diagnosis),
        )
    return Recommendation(
        dict.fromkeys(THREAD_VARIABLES, "1"),
        f"the first run ended before its processes could be read (at {FACTS_AFTER_SECONDS:g} s): 1 thread per process",
    )


def _names(diagnosis: Diagnosis) -> str | None:
    return ", ".join(f"{f.cause.value}/{f.mechanism.value}" for f in diagnosis.findings) or None


def _facts_of(run: Run, facts: WorkloadFacts, cpus: float, quota: float | None) -> Facts:
    """The rules' view of the first run: its whole counts over its whole wall time, and its processes."""
    usage = facts.sample.usage
    processes = tuple(
        ProcessView(
            pid=process.pid,
            ppid=process.ppid,
            comm=process.comm,
            command=process.command,
            threads=process.threads,
            cpu_percent=usage[process.pid].percent if process.pid in usage else None,
            system_percent=usage[process.pid].system_percent if process.pid in usage else None,
            affinity=process.affinity,
            libraries=tuple(lib.implementation for lib in facts.details[process.pid].libraries)
            if process.pid in facts.details
            else (),
            environment=_environment(facts, process.pid),
        )
        for process in facts.sample.processes
    )
    libraries: dict[tuple[str, str, str | None], list[int]] = {}
    for pid, detail in facts.details.items():
        for library in detail.libraries:
            libraries.setdefault((library.api, library.implementation, library.version), []).append(pid)
    used = run.user_seconds + run.system_seconds
    workload = WorkloadView(
        ref=WorkloadRef(cgroup="(verify)"),
        seconds=run.wall_seconds,
        cpus_allowed=cpus,
        cpu_limit_cores=quota,
        cpu_used_cores=used / run.wall_seconds if run.wall_seconds else None,
        system_share=run.system_seconds / used if used else None,
        threads=run.threads_seen or None,
        sched_yield_calls=run.counts.sched_yield_calls,
        futex_calls={op: float(count) for op, count in run.counts.futex_calls.items()},
        futex_wait_seconds=run.counts.futex_wait_seconds,
        runqueue_wait_seconds=run.counts.runqueue_wait_seconds,
        preempted_seconds=run.counts.preempted_seconds,
        processes=processes,
        pools=tuple(PoolView(pool.parent_pid, pool.command, pool.pids) for pool in facts.pools),
        libraries=tuple(
            LibraryView(api, impl, version, tuple(pids)) for (api, impl, version), pids in libraries.items()
        ),
    )
    return Facts(NodeView(cpus=os.cpu_count()), (workload,), sources=("bpf (schedwatch verify)",))


def _environment(facts: WorkloadFacts, pid: int) -> tuple[tuple[str, str], ...] | None:
    detail = facts.details.get(pid)
    if detail is None or detail.environment.access.value != "read":
        return None
    return detail.environment.values


def judge(first: Run, fixed: Run) -> Verdict:
    """Helps: at least 5 % faster, or no slower while the contention it targets (yields, run-queue wait) was real
    and is mostly gone."""
    if fixed.stopped:
        return Verdict(False, None, False, "the fixed run was stopped at the duration limit")
    speedup = first.wall_seconds / fixed.wall_seconds if fixed.wall_seconds > 0 else None
    lower_bound = first.stopped
    if fixed.exit_status != 0 and first.exit_status == 0:  # failing fast is not being faster
        statuses = f"exit status {first.exit_status} as is, {fixed.exit_status} fixed"
        return Verdict(False, speedup, lower_bound, f"the fixed run failed ({statuses})")
    if speedup is not None and speedup >= MIN_SPEEDUP:
        return Verdict(True, speedup, lower_bound, f"{_fold(speedup, lower_bound)} faster")
    gone = [name for name, was, now in _contention(first, fixed) if now <= CONTENTION_GONE * was]
    if speedup is not None and speedup >= MAX_SLOWDOWN and gone:
        return Verdict(True, speedup, lower_bound, f"about as fast, and {' and '.join(gone)} mostly gone")
    slower = "not faster" if speedup is None or speedup >= MAX_SLOWDOWN else "slower"
    return Verdict(False, speedup, lower_bound, f"{slower} ({_fold(speedup, lower_bound)}), no contention removed")


def _contention(first: Run, fixed: Run) -> list[tuple[str, float, float]]:
    """(what, per second as is, per second fixed) for the contention that was real in the first run."""
    found = []
    yields_before = first.counts.sched_yield_calls / first.wall_seconds
    if yields_before >= YIELDS_PER_SECOND_REAL:
        found.append(("sched_yield calls", yields_before, fixed.counts.sched_yield_calls / fixed.wall_seconds))
    runq_before = (first.counts.runqueue_wait_seconds or 0.0) / first.wall_seconds
    if runq_before >= RUNQ_PER_SECOND_REAL and fixed.counts.runqueue_wait_seconds is not None:
        found.append(("run-queue wait", runq_before, fixed.counts.runqueue_wait_seconds / fixed.wall_seconds))
    return found


def _fold(speedup: float | None, lower_bound: bool) -> str:
    if speedup is None:
        return "speed-up unknown"
    return f"{'at least ' if lower_bound else ''}{speedup:.2f}x"


def to_json(report: Report) -> dict[str, Any]:
    """The report as JSON: schema "schedwatch.verify/v1". "as_is" and "fixed" are the runs compared (the median
    wall time of each side); "runs" lists every run."""

    def entry(run: Run) -> dict[str, Any]:
        fields = asdict(run)
        fields.update(fields.pop("counts"))
        fields["stopped_at_limit"] = run.stopped
        return fields

    return {
        "schema": "schedwatch.verify/v1",
        "command": report.command,
        "cpus": report.cpus,
        "fix": asdict(report.recommendation),
        "as_is": entry(report.as_is),
        "fixed": entry(report.fixed),
        "runs": [entry(run) for run in report.runs],
        "verdict": asdict(report.verdict),
    }


def to_text(report: Report) -> str:
    """The report for a person: the two runs side by side, the fix, the verdict."""
    count = next(iter(report.recommendation.variables.values()), "?")
    rows: list[tuple[str, Callable[[Run], str]]] = [
        ("wall time", lambda r: f"{r.wall_seconds:.2f} s" + (" (stopped)" if r.stopped else "")),
        ("user CPU", lambda r: f"{r.user_seconds:.2f} s"),
        ("system CPU", lambda r: f"{r.system_seconds:.2f} s"),
        ("sched_yield calls", lambda r: f"{r.counts.sched_yield_calls:,}"),
        ("futex calls", lambda r: f"{r.futex_total:,}"),
        ("futex wait", lambda r: f"{r.counts.futex_wait_seconds:.2f} s"),
        ("run-queue wait", lambda r: _seconds(r.counts.runqueue_wait_seconds)),
        ("preempted", lambda r: _seconds(r.counts.preempted_seconds)),
        ("exit status", lambda r: "stopped" if r.stopped else str(r.exit_status)),
    ]
    lines = [
        f"schedwatch verify: {' '.join(report.command)}",
        f"  fix: thread variables = {count} ({report.recommendation.source})",
        f"  CPUs it may use: {report.cpus:g}",
    ]
    if len(report.runs) > 2:
        for label in ("as is", "fixed"):
            walls = ", ".join(f"{run.wall_seconds:.2f}" for run in report.runs if run.label == label)
            lines.append(f"  wall times {label}: {walls} s (the median run is shown)")
    lines += [
        "",
        f"{'':<20}{'as is':>16}{'fixed':>16}",
        *(f"{name:<20}{cell(report.as_is):>16}{cell(report.fixed):>16}" for name, cell in rows),
        "",
    ]
    verdict = report.verdict
    speed = _fold(verdict.speedup, verdict.speedup_is_lower_bound)
    lines.append(f"speed-up: {speed}; the fix {'HELPS' if verdict.helps else 'DOES NOT HELP'}: {verdict.reason}")
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "not counted" if value is None else f"{value:.2f} s"
