"""How the scenario suite scores a diagnosis (no root needed): what counts as correct, as a hit, as a false finding,
and which workload's findings are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.catalog import HEALTHY, Expected
from tests.scenarios.suite import BEGIN, END, Found, Outcome, findings_for, report, write_between_markers

POOL = Expected("thread-pool-oversubscription", "yield-storm")
STORM = Found("thread-pool-oversubscription", "yield-storm")
SPIN = Found("thread-pool-oversubscription", "user-space-spin")
THROTTLED = Found("cpu-throttling", "quota")
SATURATED = Found("run-queue-saturation", "too-many-runnable")


@pytest.mark.parametrize(
    ("expected", "found", "correct", "hit", "false"),
    [
        (POOL, (STORM,), True, True, ()),
        (POOL, (SPIN,), False, False, (SPIN,)),  # the right cause by the wrong mechanism is a miss
        (POOL, (STORM, SATURATED), False, True, (SATURATED,)),
        (POOL, (), False, False, ()),
        (Expected("cpu-throttling"), (THROTTLED,), True, True, ()),  # no mechanism expected: any will do
        (
            Expected("thread-pool-oversubscription", "yield-storm", frozenset({"cpu-throttling"})),
            (STORM, THROTTLED),
            True,
            True,
            (),
        ),
        (HEALTHY, (), True, False, ()),
        (HEALTHY, (SATURATED,), False, False, (SATURATED,)),
    ],
)
def test_outcome(
    expected: Expected, found: tuple[Found, ...], correct: bool, hit: bool, false: tuple[Found, ...]
) -> None:
    outcome = Outcome("s", 1, expected, found)
    assert (outcome.correct, outcome.hit, outcome.false_findings) == (correct, hit, false)


def test_a_failed_diagnosis_is_never_correct() -> None:
    assert not Outcome("s", 1, HEALTHY, (), error="diagnose exited with 1").correct


def document(
    *workloads: dict[str, str], findings: tuple[tuple[dict[str, str], str, str], ...] = ()
) -> dict[str, object]:
    ref = {"container_id": "", "container": "", "pod": "", "namespace": "", "cgroup": ""}
    return {
        "workloads": [{"ref": {**ref, **workload}} for workload in workloads],
        "findings": [{"workload": {**ref, **w}, "cause": c, "mechanism": m} for w, c, m in findings],
    }


def test_only_the_scenarios_workload_is_read() -> None:
    mine, other = {"cgroup": "/t/numpy"}, {"cgroup": "/t/numpy-other"}
    diagnosis = document(
        mine, other, findings=((other, "cpu-throttling", "quota"), (mine, "run-queue-saturation", "too-many-runnable"))
    )
    assert findings_for(diagnosis, cgroup="/t/numpy") == (SATURATED,)
    boxed = document({"container_id": "abc123"}, findings=(({"container_id": "abc123"}, "cpu-throttling", "quota"),))
    assert findings_for(boxed, container_id="abc123") == (THROTTLED,)


def test_no_finding_counts_only_when_the_workload_was_looked_at() -> None:
    with pytest.raises(RuntimeError, match="does not list the workload /t/sleeper"):
        findings_for(document({"cgroup": "/t/other"}), cgroup="/t/sleeper")


def test_report_table_and_markers(tmp_path: Path) -> None:
    outcomes = [
        Outcome("numpy126-pool", 1, POOL, (STORM,)),
        Outcome("numpy126-pool", 2, POOL, (STORM, SATURATED)),
        Outcome("sleeper", 1, HEALTHY, ()),
    ]
    table = report(outcomes, "make scenarios", 10.0)
    assert "recall (sick runs named with the right cause and mechanism): 2/2 = 100%" in table
    assert "precision (findings that were the expected one): 2/3 = 67%" in table
    assert (
        "| numpy126-pool | thread-pool-oversubscription/yield-storm | thread-pool-oversubscription/yield-storm |"
        in table
    )
    assert "**thread-pool-oversubscription/yield-storm, run-queue-saturation/too-many-runnable** | 1/2 |" in table
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{BEGIN}\nold\n{END}\noutro\n")
    write_between_markers(page, table)
    assert page.read_text() == f"intro\n{BEGIN}\n{table}\n{END}\noutro\n"


STEAL = Found("hypervisor-steal", "steal")


def test_a_steal_finding_stands_only_where_the_node_had_that_steal() -> None:
    """The node's steal in the window, read from the same diagnosis: at the rule's bar (10 %) the finding is true
    whatever the scenario; below it, it is a false finding like any other."""
    assert Outcome("s", 1, HEALTHY, (STEAL,), node_steal=21.0).correct
    assert Outcome("s", 1, POOL, (STORM, STEAL), node_steal=10.0).correct
    assert Outcome("s", 1, HEALTHY, (STEAL,), node_steal=9.9).false_findings == (STEAL,)
    assert Outcome("s", 1, HEALTHY, (STEAL,)).false_findings == (STEAL,)  # steal not read: not excused


def test_a_neighbour_finding_stands_only_where_it_names_a_neighbour_not_the_scenarios_own() -> None:
    """healthy-neighbour-apart puts its companion on the other CPU: if the machine's own processes held the CPU the
    workload waited for, the finding that names them is true of the machine; one naming the companion (or no
    neighbour at all) is false."""
    root = Found("noisy-neighbour", "cpu-held-by-neighbour", "processes in the root cgroup (outside any container)")
    companion = Found("noisy-neighbour", "cpu-held-by-neighbour", "/schedwatch-tests/healthy-neighbour-apart-companion")
    unnamed = Found("noisy-neighbour", "cpu-held-by-neighbour")
    assert Outcome("s", 1, HEALTHY, (root,)).correct
    assert "held by processes in the root cgroup" in report([Outcome("s", 1, HEALTHY, (root,))], "x", 5.0)
    assert Outcome("s", 1, HEALTHY, (companion,)).false_findings == (companion,)
    assert Outcome("s", 1, HEALTHY, (unnamed,)).false_findings == (unnamed,)
    assert Outcome("s", 1, POOL, (STORM, root)).correct  # a pool's finding beside a neighbour the machine had
    again = Outcome.from_dict(Outcome("sleeper", 1, HEALTHY, (root,)).as_dict())
    assert again.found == (root,) and again.correct


def test_recall_and_precision_per_cause() -> None:
    """Two pool runs named (one with saturation beside it), a healthy run with a saturation finding, a throttled pool
    whose throttling is also true: the pool 2/2 and 2/2, saturation 0 of 2 right, throttling 1/1 right."""
    limited = Expected("thread-pool-oversubscription", "yield-storm", frozenset({"cpu-throttling"}))
    outcomes = [
        Outcome("a", 1, POOL, (STORM, SATURATED)),
        Outcome("b", 1, HEALTHY, (SATURATED,)),
        Outcome("c", 1, limited, (STORM, THROTTLED)),
        Outcome("d", 1, HEALTHY, (STEAL,), node_steal=30.0),
    ]
    rows = {line.split(" | ")[0].strip("| "): line for line in report(outcomes, "x", 10.0).splitlines()}
    assert rows["thread-pool-oversubscription"].endswith("| 2/2 = 100% | 2/2 = 100% |")
    assert rows["run-queue-saturation"].endswith("| no sick scenario | 0/2 = 0% |")
    assert rows["cpu-throttling"].endswith("| no sick scenario | 1/1 = 100% |")
    assert "none; 1 true of the machine" in rows["hypervisor-steal"]


def test_a_logged_run_is_scored_again_as_it_was() -> None:
    """--rescore reads the log's lines back into the same outcomes (expectations from the catalog)."""
    outcome = Outcome("numpy126-pool", 2, POOL, (STORM, STEAL), node_steal=12.5)
    again = Outcome.from_dict(outcome.as_dict())
    assert (again.scenario, again.run, again.expected, again.found, again.node_steal) == (
        "numpy126-pool",
        2,
        POOL,
        (STORM, STEAL),
        12.5,
    )
    assert again.correct
