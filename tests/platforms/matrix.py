"""`make platforms`: the kernel tests of the tier on every machine (tests/platforms/machines.py), results in a table.

``python -m tests.platforms.matrix [--machines NAME,...] [--report docs/platforms.md] [--out platforms-out]``
``[--tests NODE,...]`` runs those pytest nodes alone in each machine chosen (to run a machine's failures again).

Each Debian kernel is fetched into the kernel cache and booted under QEMU (kernels.py, vm.py); this machine's own
kernel runs the same tests in place. Exit status 1 when any machine failed a test or did not finish.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.platforms import kernels, vm
from tests.platforms.machines import MACHINES, Machine, left_out, nodes_for, pytest_command

REPO = Path(__file__).resolve().parents[2]
VM_TIMEOUT = 3 * 3600.0
# The C workloads of the tier's tests, compiled here: gcc under emulation would take minutes.
WORKLOADS = (
    "yielder",
    "futexer",
    "spinner",
    "sleeper",
    "forker",
    "syscaller",
    "threader",
    "alloc_churn",
)  # one machine's whole run under emulation; the short tier has its own bound


@dataclass
class MachineResult:
    """One machine's outcome: each test's result by node id, and what the guest said of itself."""

    machine: Machine
    release: str
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> passed | failed | error | skipped
    messages: dict[str, str] = field(default_factory=dict)  # node id -> first line of its failure
    details: dict[str, str] = field(default_factory=dict)  # node id -> the whole failure, as pytest wrote it
    seconds: float = 0.0
    accelerator: str = "none"
    failure: str = ""  # the VM did not boot or did not finish

    @property
    def passed(self) -> bool:
        return not self.failure and bool(self.outcomes) and all(o == "passed" for o in self.outcomes.values())


def prepare_host() -> None:
    """What the guest must not have to make under emulation: the C workloads, and numpy 1.26 for the pool test."""
    from tests.kernel.test_diagnosis_facts import NUMPY126, PIP_INSTALL
    from tests.support.workloads import build

    for name in WORKLOADS:
        build(name)
    if not NUMPY126.exists():
        partial = NUMPY126.with_name(NUMPY126.name + ".partial")
        subprocess.run([*PIP_INSTALL, str(partial), "numpy==1.26.4", "threadpoolctl>=3"], check=True)
        partial.rename(NUMPY126)


def run_machine(
    machine: Machine, out: Path, short: bool = False, timeout: float = VM_TIMEOUT, tests: list[str] | None = None
) -> MachineResult:
    """Run *machine*'s tests (the short tier's alone with *short*, or the pytest nodes *tests*); results and logs
    land in *out*/NAME."""
    results = out / machine.name
    nodes = tests or nodes_for(machine.layout, short)
    if not machine.in_vm:
        return _run_here(machine, nodes, results)
    assert machine.series is not None and machine.flavour is not None
    kernel = kernels.fetch(kernels.newest_release(machine.series, machine.flavour))
    result = MachineResult(machine, kernel.release)
    try:
        run = vm.run_guest(kernel, machine.layout, nodes, results, timeout)
    except vm.VmFailed as failed:
        result.failure = str(failed)
        return result
    result.seconds, result.accelerator = run.seconds, run.accelerator
    _read_junit(results / "junit.xml", result)
    if not result.outcomes:
        result.failure = f"pytest ran no test (exit {run.exit_code}); see {results / 'pytest.log'}"
    return result


def _run_here(machine: Machine, nodes: list[str], results: Path) -> MachineResult:
    results.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (results / "pytest.log").open("w") as log:
        subprocess.run(
            pytest_command(nodes, results, results / "tmp"),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    result = MachineResult(machine, os.uname().release, seconds=time.monotonic() - started)
    _read_junit(results / "junit.xml", result)
    return result


def _read_junit(path: Path, result: MachineResult) -> None:
    if not path.exists():
        return
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        node = f"{module}::{case.get('name')}"
        outcome = "passed"
        for kind in ("failure", "error", "skipped"):
            element = case.find(kind)
            if element is not None:
                outcome = "failed" if kind == "failure" else kind
                result.messages[node] = ((element.get("message") or "").splitlines() or [""])[0][:300]
                result.details[node] = element.text or element.get("message") or ""
                break
        result.outcomes[node] = outcome


def _run_and_tell(machine: Machine, out: Path, short: bool, tests: list[str] | None) -> MachineResult:
    print(f"platforms: {machine.name} ...", flush=True)
    result = run_machine(machine, out, short, tests=tests)
    passed = sum(outcome == "passed" for outcome in result.outcomes.values())
    failure = f" — {result.failure.splitlines()[0]}" if result.failure else ""
    print(
        f"platforms: {machine.name} on {result.release}: {passed} of {len(result.outcomes)} passed "
        f"in {result.seconds / 60:.1f} min{failure}",
        flush=True,
    )
    for node, outcome in result.outcomes.items():
        if outcome != "passed":
            print(f"  {outcome}: {node} {result.messages.get(node, '')}", flush=True)
    return result


HEADER = (
    "Each machine's latest run, on this project's development machine (2 CPUs, QEMU without KVM: nested KVM hangs\n"
    "there). A run of some machines (`--machines`) rewrites their rows and sections and keeps the others'."
)
TABLE_HEAD = (
    "| machine | kernel | cgroup layout | accelerator | date | tests passed | result | minutes |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
)


@dataclass(frozen=True)
class ReportPart:
    """One machine's row of the table and its section of tests."""

    row: str
    section: str


def machine_part(result: MachineResult, command: str, today: str) -> ReportPart:
    """*result*'s row (with the date) and its section (the command, then each test's outcome)."""
    passed = sum(outcome == "passed" for outcome in result.outcomes.values())
    verdict = "pass" if result.passed else ("did not finish" if result.failure else "FAIL")
    row = (
        f"| {result.machine.name} | {result.release} | {result.machine.layout} | {result.accelerator} | {today} | "
        f"{passed} of {len(result.outcomes)} | {verdict} | {result.seconds / 60:.1f} |"
    )
    lines = [f"### {result.machine.name} ({result.release}, {result.machine.layout})", ""]
    lines += [f"{today}: `{command}`, {result.seconds / 60:.1f} min.", ""]
    if result.failure:
        lines += ["```", result.failure.strip()[-2000:], "```"]
    for node, outcome in result.outcomes.items():
        message = result.messages.get(node)
        lines.append(f"- {outcome}: `{node}`" + (f" ({message})" if message and outcome != "passed" else ""))
    for test in left_out(result.machine.layout):
        lines.append(f"- not run: `{test.node}` ({test.why_not_elsewhere})")
    return ReportPart(row, "\n".join(lines))


def render(parts: dict[str, ReportPart]) -> str:
    """The measured part of docs/platforms.md: the table, then each machine's section, in MACHINES' order."""
    names = [machine.name for machine in MACHINES if machine.name in parts]
    lines = [HEADER, "", *TABLE_HEAD, *(parts[name].row for name in names)]
    for name in names:
        lines += ["", parts[name].section]
    return "\n".join(lines) + "\n"


def parse(measured: str) -> dict[str, ReportPart]:
    """The machines' parts of a measured part written by render (anything else in it is not kept)."""
    known = {machine.name for machine in MACHINES}
    rows: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in measured.splitlines():
        if line.startswith("### "):
            name = line.split()[1]
            current = sections.setdefault(name, []) if name in known else None
        elif line.startswith("| ") and current is None and (name := line.split("|")[1].strip()) in known:
            rows[name] = line
            continue
        if current is not None:
            current.append(line)
    return {name: ReportPart(rows[name], "\n".join(sections[name]).strip()) for name in rows if name in sections}


def report(results: list[MachineResult], command: str, today: str | None = None) -> str:
    """The measured part for *results* alone."""
    date = today or datetime.date.today().isoformat()
    return render({result.machine.name: machine_part(result, command, date) for result in results})


MEASURED_START = "<!-- measured: written by `make platforms` -->"
MEASURED_END = "<!-- end of measured -->"


def write_report(document: Path, measured: str) -> None:
    """Merge *measured* (report's text) into the measured part of *document* (between its markers): its machines'
    rows and sections replace theirs, the other machines' are kept."""
    text = document.read_text()
    head, start, rest = text.partition(MEASURED_START)
    old, end, tail = rest.partition(MEASURED_END)
    if not start or not end:
        raise SystemExit(f"{document} lacks the markers {MEASURED_START} ... {MEASURED_END}")
    merged = {**parse(old), **parse(measured)}
    document.write_text(f"{head}{MEASURED_START}\n{render(merged)}{MEASURED_END}{tail}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tests.platforms.matrix", description=__doc__)
    parser.add_argument("--machines", default=",".join(machine.name for machine in MACHINES))
    parser.add_argument("--report", type=Path, help="the document whose measured part to rewrite")
    parser.add_argument("--out", type=Path, default=REPO / "platforms-out")
    parser.add_argument("--short", action="store_true", help="the short tier's tests only")
    parser.add_argument("--tests", help="pytest node ids, comma-separated, to run instead of the tier's")
    parser.add_argument("--jobs", type=int, default=1, help="machines run at once (each emulated VM takes a CPU)")
    args = parser.parse_args(argv)
    if args.tests and args.report:
        parser.error("--report keeps each machine's whole tier: run --tests without it (results in --out's report.md)")
    wanted = args.machines.split(",")
    unknown = set(wanted) - {machine.name for machine in MACHINES}
    if unknown:
        parser.error(f"no such machines: {', '.join(sorted(unknown))} (known: {', '.join(m.name for m in MACHINES)})")
    prepare_host()
    chosen = [machine for machine in MACHINES if machine.name in wanted]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        tests = args.tests.split(",") if args.tests else None
        results = list(pool.map(lambda machine: _run_and_tell(machine, args.out, args.short, tests), chosen))
    measured = report(results, shlex.join(["python", "-m", "tests.platforms.matrix", *argv]))
    (args.out / "report.md").write_text(measured)
    if args.report:
        write_report(args.report, measured)
    return 0 if all(result.passed for result in results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
