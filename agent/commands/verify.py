"""`schedwatch verify -- CMD ...`: run a command as it is, then with the fix, and say if the fix helps.

Each run gets a fresh cgroup of its own; the BPF programs (loaded in this process, as ``schedwatch run`` loads them)
count that cgroup's yields, futex calls, futex wait, run-queue wait, preempted time and system calls by family
exactly, the cgroup's cpu.stat gives its user and system CPU, and its memory cgroup (where there is one) its page
faults. The fix is the thread variables set to the count a diagnosis of the first run recommends; when that
diagnosis names allocator churn and no thread pool, the allocator variables its fix names; when the first run gave
nothing to diagnose (it was too short, or no pool was found), the thread variables set to max(1, CPUs it may use /
pool workers), or 1 per process when no pool of workers was seen.

Exit status: 0 the fix helps, 1 it does not, 2 usage error, 3 the runs could not be measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent import log
from agent.commands import Command
from agent.commands.agent_flags import add_verify_arguments, verify_settings_from
from agent.commands.parser import CommandParser, Example
from agent.verification.fix import THREAD_VARIABLES, Recommendation, recommend
from agent.verification.runner import Cgroups, Counters, Run, VerifyError, median_run, run_once
from agent.verification.verdict import Verdict, fold, judge

SCHEMA = "schedwatch.verify/v2"
DEFAULT_LIMIT_SECONDS = 600.0
USAGE = 2
UNMEASURED = 3


@dataclass(frozen=True)
class Report:
    """Both runs, the fix, and the verdict."""

    command: list[str]
    mode: str  # where the counts came from: bpf, perf or procfs (--mode, with auto's fallback)
    cpus: float
    recommendation: Recommendation
    runs: list[Run]  # every run, in the order they ran
    as_is: Run  # the one compared: the median wall time of its side
    fixed: Run
    verdict: Verdict


def add_arguments(parser: CommandParser) -> None:
    """How long, under which quota, how often, what output, and the command."""
    runs = parser.add_argument_group("the runs")
    runs.add_argument(
        "--duration-limit",
        type=float,
        default=DEFAULT_LIMIT_SECONDS,
        metavar="S",
        help=f"stop each run after S seconds (default {DEFAULT_LIMIT_SECONDS:g})",
    )
    runs.add_argument("--cpus", type=float, metavar="N", help="run both under a CPU quota of N CPUs")
    runs.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each side N times, alternating; compare the median runs",
    )
    output = parser.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print the report as JSON (the command's output: stderr)")
    add_verify_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG ...]")


def main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
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
        state_dir, mode = verify_settings_from(args, parser)
        report = verify(command, args.duration_limit, args.cpus, state_dir, args.json, args.repeat, mode)
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
    if shutil.which(command[0]) is None:
        return f"cannot run {command[0]!r}: no such executable; give a command on PATH or an executable file's path"
    if not (limit > 0 and math.isfinite(limit)):
        return f"--duration-limit must be a number of seconds above 0, not {limit:g}"
    if cpus is not None and not (0.01 <= cpus <= 4096):
        return f"--cpus must be between 0.01 and 4096, not {cpus:g}"
    if not 1 <= repeat <= 20:
        return f"--repeat must be between 1 and 20, not {repeat}"
    return None


def verify(
    command: list[str],
    limit: float,
    quota: float | None,
    state_dir: Path,
    quiet: bool,
    repeat: int = 1,
    mode: str = "auto",
) -> Report:
    """Run *command* as it is, choose the fix from that run, run it fixed, and compare; with *repeat* > 1 the two
    alternate that many times and the run of median wall time of each side is compared."""
    if os.geteuid() != 0:
        raise VerifyError("needs root (it makes a cgroup for each run; bpf mode loads programs): run it with sudo")
    output = sys.stderr if quiet else None
    runs: list[Run] = []
    with Counters.loaded(state_dir, mode) as counters, Cgroups.made(quota) as cgroups:
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
    return Report(command, counters.mode, cpus, recommendation, runs, as_is, fixed, judge(as_is, fixed))


def to_json(report: Report) -> dict[str, Any]:
    """The report as JSON: schema "schedwatch.verify/v2" (docs/schemas/verify.schema.json). "as_is" and "fixed" are
    the runs compared (the median wall time of each side); "runs" lists every run. v2: "mode" says where the counts
    came from, and a count the mode cannot give is null (v1 had numbers only, BPF's)."""

    def entry(run: Run) -> dict[str, Any]:
        fields = asdict(run)
        fields.update(fields.pop("counts"))
        fields["stopped_at_limit"] = run.stopped
        return fields

    return {
        "schema": SCHEMA,
        "command": report.command,
        "mode": report.mode,
        "cpus": report.cpus,
        "fix": asdict(report.recommendation),
        "as_is": entry(report.as_is),
        "fixed": entry(report.fixed),
        "runs": [entry(run) for run in report.runs],
        "verdict": asdict(report.verdict),
    }


def to_text(report: Report) -> str:
    """The report for a person: the two runs side by side, the fix, the verdict."""
    variables = report.recommendation.variables
    rows: list[tuple[str, Callable[[Run], str]]] = [
        ("wall time", lambda r: f"{r.wall_seconds:.2f} s" + (" (stopped)" if r.stopped else "")),
        ("user CPU", lambda r: _seconds(r.user_seconds, "not read")),
        ("system CPU", lambda r: _seconds(r.system_seconds, "not read")),
        ("sched_yield calls", lambda r: _count(r.counts.sched_yield_calls)),
        ("futex calls", lambda r: _count(r.futex_total)),
        ("futex wait", lambda r: _seconds(r.counts.futex_wait_seconds)),
        ("run-queue wait", lambda r: _seconds(r.counts.runqueue_wait_seconds)),
        ("preempted", lambda r: _seconds(r.counts.preempted_seconds)),
        ("page faults", lambda r: _count(r.counts.page_faults)),
        ("exit status", lambda r: "stopped" if r.stopped else str(r.exit_status)),
    ]
    lines = [
        f"schedwatch verify: {' '.join(report.command)}",
        f"  fix: {_variables(variables)} ({report.recommendation.source})",
        f"  CPUs it may use: {report.cpus:g}",
        f"  counted in {report.mode} mode" + ("" if report.mode == "bpf" else " (what it cannot count: docs/modes.md)"),
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
    speed = fold(verdict.speedup, verdict.speedup_is_lower_bound)
    lines.append(f"speed-up: {speed}; the fix {'HELPS' if verdict.helps else 'DOES NOT HELP'}: {verdict.reason}")
    return "\n".join(lines)


def _variables(variables: dict[str, str]) -> str:
    """The thread variables as one count, or every variable of another fix."""
    values = set(variables.values())
    if set(variables) <= set(THREAD_VARIABLES) and len(values) == 1:
        return f"thread variables = {values.pop()}"
    return " ".join(f"{name}={value}" for name, value in variables.items()) or "nothing to set"


def _count(value: int | None) -> str:
    return "not counted" if value is None else f"{value:,}"


def _seconds(value: float | None, unknown: str = "not counted") -> str:
    return unknown if value is None else f"{value:.2f} s"


COMMAND = Command(
    name="verify",
    help="run a command as it is, then with the fix: is it faster?",
    description="Run a command as it is, then with the fix its diagnosis recommends, each counted in a cgroup of its "
    "own: does the fix help? Exit 0 yes, 1 no, 2 usage error, 3 not measured. docs/verify.md.",
    add_arguments=add_arguments,
    run=main,
    examples=(
        Example("sudo schedwatch verify -- python job.py", "as it is, then with the fix"),
        Example("sudo schedwatch verify --cpus 2 --repeat 3 -- python job.py", "a 2-CPU quota, 3 runs each"),
    ),
)
