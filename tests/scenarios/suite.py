"""python -m tests.scenarios.suite [--runs N] [--duration S] [--report FILE] [SCENARIO ...]

Runs each scenario live in a cgroup of its own (the container ones in Podman with a CPU limit), runs
`schedwatch diagnose --json --duration S` on it, and scores what it found against what the scenario should show:
per run, the findings for that workload; in the end a precision/recall table (written to --report). Needs root.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.diagnosis.findings import Cause
from agent.diagnosis.rules.thresholds import DEFAULT
from tests.scenarios.catalog import BY_NAME, Expected, Scenario
from tests.scenarios.containers import CONTAINER_SCENARIOS, ContainerScenario, container_running
from tests.scenarios.live import ScenarioCgroup, running
from tests.support.agent import REPO, require_root
from tests.support.workloads import CgroupSandbox

WARM_UP = 3.0  # a container's start and its Python's imports are done by then
DIAGNOSE_SECONDS = 10.0
DIAGNOSE_TIMEOUT = 180.0  # compiling the BPF programs takes seconds; a busy machine more
LIFETIME_MARGIN = 240.0  # a workload outlives its diagnosis; it is killed as soon as the diagnosis is done


@dataclass(frozen=True)
class Found:
    """One finding of the diagnosis for the scenario's workload."""

    cause: str
    mechanism: str
    held_by: str = ""  # noisy-neighbour: the neighbour that held most of its wait, as the finding names it

    def __str__(self) -> str:
        return f"{self.cause}/{self.mechanism}"


STEAL = "hypervisor-steal"
NEIGHBOUR = "noisy-neighbour"
HELD_BY = "its wait held by "  # the evidence naming a neighbour (agent/diagnosis/rules/neighbour.py)
COMPANION = "-companion"  # the cgroup of a scenario's own neighbour (tests/scenarios/live.py)


@dataclass(frozen=True)
class Outcome:
    """One run of one scenario, scored. A finding true of the machine rather than of the scenario is not counted
    false: steal where the run's node did lose that much CPU to the hypervisor (this VM's host steals 0-36 % now and
    then), and a noisy neighbour that is not the scenario's own (processes of the machine, or another test, held the
    CPUs the workload waited for)."""

    scenario: str
    run: int
    expected: Expected
    found: tuple[Found, ...]
    error: str | None = None  # the diagnosis failed: counted as a miss
    node_steal: float | None = None  # percent of the node's CPU time stolen in the window

    @property
    def hit(self) -> bool:
        """The expected cause (and mechanism, where one is expected) is among the findings."""
        return self.expected.cause is not None and any(self._matches(found) for found in self.found)

    @property
    def false_findings(self) -> tuple[Found, ...]:
        """Findings that are not the expected one nor also true there (every finding, on a healthy scenario)."""
        return tuple(
            found
            for found in self.found
            if not self._matches(found) and found.cause not in self.expected.also_true and not self.of_machine(found)
        )

    def of_machine(self, found: Found) -> str:
        """Why *found* is true of the machine, not of the scenario ('' if it is not): a steal finding where the node
        did lose that much CPU to the hypervisor; a noisy neighbour, where none was expected, that the finding names
        and that is not the scenario's own companion."""
        if found.cause == STEAL and self.node_steal is not None and self.node_steal >= DEFAULT.steal_percent:
            return f"node steal {self.node_steal:.0f} %"
        if (
            found.cause == NEIGHBOUR
            and self.expected.cause != NEIGHBOUR
            and found.held_by
            and COMPANION not in found.held_by
        ):
            return f"held by {found.held_by}"
        return ""

    @property
    def correct(self) -> bool:
        """Exactly what was expected: the one right finding, or none at all on a healthy scenario."""
        if self.error is not None:
            return False
        if self.expected.cause is None:
            return not self.false_findings
        return self.hit and not self.false_findings

    def _matches(self, found: Found) -> bool:
        if found.cause != self.expected.cause:
            return False
        return self.expected.mechanism is None or found.mechanism == self.expected.mechanism

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> Outcome:
        """An outcome as the log kept it (as_dict), its expectation from the catalog."""
        name = entry["scenario"]
        expected = BY_NAME[name].expected if name in BY_NAME else CONTAINER_SCENARIOS[name].expected
        held_by = entry.get("held_by") or {}
        found = tuple(Found(*text.split("/", 1), held_by=held_by.get(text, "")) for text in entry["found"])
        return cls(name, entry["run"], expected, found, entry["error"], entry.get("node_steal"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "run": self.run,
            "expected": str(self.expected),
            "found": [str(found) for found in self.found],
            "held_by": {str(found): found.held_by for found in self.found if found.held_by},
            "correct": self.correct,
            "error": self.error,
            "node_steal": self.node_steal,
            "load": os.getloadavg()[0],  # the machine's 1-minute load average when the run was scored
        }


def diagnose(work: Path, seconds: float, selector: list[str]) -> dict[str, Any]:
    """`schedwatch diagnose --json --duration S` with *selector* (e.g. --cgroup PATH), as a person runs it."""
    command = [sys.executable, "-m", "agent", "diagnose", "--json", "--duration", f"{seconds:g}", *selector]
    result = subprocess.run(
        [*command, "--state-dir", str(work)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=DIAGNOSE_TIMEOUT,
    )
    if result.returncode != 0 and not result.stdout.strip():
        raise RuntimeError(f"{' '.join(command)} exited with {result.returncode}: {result.stderr.strip()[-2000:]}")
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _is_it(ref: dict[str, Any], cgroup: str, container_id: str) -> bool:
    return bool((container_id and ref["container_id"] == container_id) or (cgroup and ref["cgroup"] == cgroup))


def findings_for(document: dict[str, Any], cgroup: str = "", container_id: str = "") -> tuple[Found, ...]:
    """The findings whose workload is the scenario's (its cgroup path, or its container); the diagnosis must have
    looked at that workload, or "no finding" would say nothing."""
    if not any(_is_it(workload["ref"], cgroup, container_id) for workload in document["workloads"]):
        listed = [workload["ref"] for workload in document["workloads"]][:5]
        raise RuntimeError(f"the diagnosis does not list the workload {cgroup or container_id}: it lists {listed}")
    found = []
    for finding in document["findings"]:
        if _is_it(finding["workload"], cgroup, container_id):
            held_by = next(
                (
                    item["fact"][len(HELD_BY) :]
                    for item in finding.get("evidence", ())
                    if item["fact"].startswith(HELD_BY)
                ),
                "",
            )
            found.append(Found(finding["cause"], finding["mechanism"], held_by))
    return tuple(found)


def node_steal(document: dict[str, Any]) -> float | None:
    """The node's steal over the diagnosis window, in percent (None where it was not read)."""
    cpu = document.get("node", {}).get("cpu") or {}
    steal = cpu.get("steal")
    return None if steal is None else float(steal)


def keep(document: dict[str, Any], documents: Path | None, name: str, run: int) -> None:
    """Save a diagnosis as it came, to see later why a run was scored as it was."""
    if documents is not None:
        documents.mkdir(parents=True, exist_ok=True)
        (documents / f"{name}-{run}.json").write_text(json.dumps(document, indent=1))


def run_plain(
    scenario: Scenario, run: int, sandbox: CgroupSandbox, work: Path, seconds: float, documents: Path | None = None
) -> Outcome:
    """One run of a scenario in a cgroup made for it."""
    group = ScenarioCgroup(sandbox, scenario.name, scenario.quota, scenario.memory_limit)
    try:
        with running(scenario, group, scenario.warm_up + seconds + LIFETIME_MARGIN, sandbox) as process:
            time.sleep(scenario.warm_up)
            document = diagnose(work, seconds, ["--cgroup", group.label])
            keep(document, documents, scenario.name, run)
            if process.poll() is not None:
                raise RuntimeError(f"{scenario.name} ended before its diagnosis did ({process.returncode})")
        found = findings_for(document, cgroup=group.label)
        return Outcome(scenario.name, run, scenario.expected, found, node_steal=node_steal(document))
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as error:
        return Outcome(scenario.name, run, scenario.expected, (), error=str(error)[-500:])
    finally:
        group.kill_all()
        sandbox.remove(group.v2)


def run_container(
    scenario: ContainerScenario, run: int, work: Path, seconds: float, documents: Path | None = None
) -> Outcome:
    """One run of a scenario in a Podman container with a CPU limit."""
    try:
        with container_running(scenario, WARM_UP + seconds + LIFETIME_MARGIN) as container_id:
            time.sleep(WARM_UP)
            document = diagnose(work, seconds, ["--container", container_id])
            keep(document, documents, scenario.name, run)
        found = findings_for(document, container_id=container_id)
        return Outcome(scenario.name, run, scenario.expected, found, node_steal=node_steal(document))
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as error:
        return Outcome(scenario.name, run, scenario.expected, (), error=str(error)[-500:])


@contextmanager
def containers_lock() -> Iterator[None]:
    """Podman's socket and image store are shared with other test runs on this machine: one user at a time."""
    import fcntl

    with open("/tmp/schedwatch-containers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_suite(
    names: Iterable[str], runs: int, seconds: float, log: Any = None, documents: Path | None = None
) -> list[Outcome]:
    """Every chosen scenario *runs* times (plain ones first, then the container ones under the lock)."""
    chosen = list(names)
    plain = [BY_NAME[name] for name in chosen if name in BY_NAME]
    boxed = [CONTAINER_SCENARIOS[name] for name in chosen if name in CONTAINER_SCENARIOS]
    outcomes: list[Outcome] = []

    def record(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if log is not None:
            print(json.dumps(outcome.as_dict()), file=log, flush=True)

    sandbox = CgroupSandbox()
    with tempfile.TemporaryDirectory(prefix="schedwatch-scenarios-") as directory:
        work = Path(directory)
        try:
            for run in range(1, runs + 1):
                for scenario in plain:
                    record(run_plain(scenario, run, sandbox, work, seconds, documents))
        finally:
            sandbox.cleanup()
        if boxed:
            with containers_lock():
                for run in range(1, runs + 1):
                    for container in boxed:
                        record(run_container(container, run, work, seconds, documents))
    return outcomes


def per_cause(outcomes: list[Outcome]) -> list[str]:
    """Recall and precision of each cause as a markdown table: the sick runs of the cause named with it, and the
    findings of the cause that were right (the expected one, or also true there). A finding true of the machine (steal
    the node had, a neighbour not the scenario's) is counted apart: true, but no scenario's."""
    lines = [
        "| cause | sick runs named (recall) | its findings that were right (precision) |",
        "| --- | --- | --- |",
    ]
    for cause in Cause:
        sick = [outcome for outcome in outcomes if outcome.expected.cause == cause.value]
        named = sum(outcome.hit for outcome in sick)
        findings = [(outcome, found) for outcome in outcomes for found in outcome.found if found.cause == cause.value]
        stolen = sum(bool(outcome.of_machine(found)) for outcome, found in findings)
        counted = [(outcome, found) for outcome, found in findings if not outcome.of_machine(found)]
        right = sum(found not in outcome.false_findings for outcome, found in counted)
        if not sick and not counted:
            cell = "no live scenario" if cause is Cause.HYPERVISOR_STEAL else "none"
            if cause is Cause.HYPERVISOR_STEAL:
                cell += " (this VM cannot make it: tested on public reports' facts)"
            aside = f"; {stolen} true of the machine" if stolen else ""
            lines.append(f"| {cause.value} | {cell} | none{aside} |")
            continue
        recall = f"{named}/{len(sick)} = {named / len(sick):.0%}" if sick else "no sick scenario"
        precision = f"{right}/{len(counted)} = {right / len(counted):.0%}" if counted else "no finding"
        aside = f" (+ {stolen} true of the machine)" if stolen else ""
        lines.append(f"| {cause.value} | {recall} | {precision}{aside} |")
    return lines


def report(
    outcomes: list[Outcome], command: str, seconds: float, when: str | None = None, load: float | None = None
) -> str:
    """The outcomes as markdown: per scenario, expected vs found in each run; then precision and recall, in all and
    per cause. *when* (default: now) and *load* (the load average at the end; not said when None) describe the
    run."""
    by_scenario: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_scenario.setdefault(outcome.scenario, []).append(outcome)
    runs = max((len(v) for v in by_scenario.values()), default=0)
    header = ["scenario", "expected", *(f"run {n}" for n in range(1, runs + 1)), "correct"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, results in by_scenario.items():
        cells = [_cell(outcome) for outcome in results] + [""] * (runs - len(results))
        correct = sum(outcome.correct for outcome in results)
        lines.append(f"| {name} | {results[0].expected} | " + " | ".join(cells) + f" | {correct}/{len(results)} |")
    hits = sum(outcome.hit for outcome in outcomes)
    sick = sum(outcome.expected.cause is not None for outcome in outcomes)
    false = sum(len(outcome.false_findings) for outcome in outcomes)
    healthy = [outcome for outcome in outcomes if outcome.expected.cause is None]
    clean = sum(not outcome.false_findings and outcome.error is None for outcome in healthy)
    errors = sum(outcome.error is not None for outcome in outcomes)
    precision = f"{hits / (hits + false):.0%}" if hits + false else "-"
    recall = f"{hits / sick:.0%}" if sick else "-"
    when = when or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    at_end = "" if load is None else f"; load average {load:.1f} at the end"
    summary = [
        f"Run {when} with `{command}` (diagnose window {seconds:g} s; {os.cpu_count()} CPUs{at_end}).",
        "",
        f"- recall (sick runs named with the right cause and mechanism): {hits}/{sick} = {recall}",
        f"- precision (findings that were the expected one): {hits}/{hits + false} = {precision}",
        f"- healthy runs with no finding (findings true of the machine aside): {clean}/{len(healthy)}",
        f"- runs whose diagnosis failed (counted as misses): {errors}",
    ]
    failed = [outcome for outcome in outcomes if outcome.error]
    details = [f"- {outcome.scenario} run {outcome.run}: {outcome.error}" for outcome in failed]
    causes = ["", *per_cause(outcomes)]
    return "\n".join([*summary, *causes, "", *lines, *(["", "Errors:", "", *details] if details else [])])


def _cell(outcome: Outcome) -> str:
    if outcome.error is not None:
        return "ERROR"
    named = [
        f"{found} ({outcome.of_machine(found)})" if outcome.of_machine(found) else str(found) for found in outcome.found
    ]
    text = ", ".join(named) or "none"
    return text if outcome.correct else f"**{text}**"


def main() -> int:
    names = [*BY_NAME, *CONTAINER_SCENARIOS]
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=DIAGNOSE_SECONDS)
    parser.add_argument("--report", type=Path, help="write the markdown table here (between the markers)")
    parser.add_argument("--log", type=Path, help="append one JSON line per run here")
    parser.add_argument("--documents", type=Path, help="save each diagnosis (JSON) in this directory")
    parser.add_argument(
        "--rescore", type=Path, metavar="LOG", help="score the runs a --log kept instead of running (no root needed)"
    )
    parser.add_argument("scenarios", nargs="*", default=[], help=f"default: all ({', '.join(names)})")
    options = parser.parse_args()
    unknown = sorted(set(options.scenarios) - set(names))
    if unknown:
        parser.error(f"unknown scenarios {unknown}; choose from {names}")
    if options.rescore is not None:
        return rescore(options.rescore, names, options.duration, options.report)
    require_root()
    if options.log:
        options.log.parent.mkdir(parents=True, exist_ok=True)
    log = options.log.open("a") if options.log else sys.stdout
    outcomes = run_suite(options.scenarios or names, options.runs, options.duration, log, options.documents)
    command = (
        "sudo make scenarios"
        if not options.scenarios
        else "python -m tests.scenarios.suite " + " ".join(options.scenarios)
    )
    table = report(outcomes, command, options.duration, load=os.getloadavg()[0])
    print(table)
    if options.report:
        write_between_markers(options.report, table)
    return 0 if all(outcome.correct for outcome in outcomes) else 1


def rescore(log: Path, names: list[str], seconds: float, target: Path | None) -> int:
    """The report of the runs *log* kept (one JSON line each), dated by the log's last write."""
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    outcomes = [Outcome.from_dict(entry) for entry in entries]
    ran = {outcome.scenario for outcome in outcomes}
    command = "sudo make scenarios" if ran == set(names) else "python -m tests.scenarios.suite " + " ".join(sorted(ran))
    written = datetime.datetime.fromtimestamp(log.stat().st_mtime, datetime.timezone.utc)
    loads = [entry.get("load") for entry in entries if entry.get("load") is not None]
    table = report(outcomes, command, seconds, written.strftime("%Y-%m-%d %H:%M UTC"), loads[-1] if loads else None)
    print(table)
    if target:
        write_between_markers(target, table)
    return 0 if all(outcome.correct for outcome in outcomes) else 1


BEGIN, END = "<!-- scenarios: begin -->", "<!-- scenarios: end -->"


def write_between_markers(path: Path, table: str) -> None:
    """Replace what lies between the markers of *path* with *table* (the prose around it stays)."""
    text = path.read_text()
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    path.write_text(f"{before}{BEGIN}\n{table}\n{END}{after}")


if __name__ == "__main__":
    sys.exit(main())
