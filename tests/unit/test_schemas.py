"""docs/schemas/: every versioned JSON document schedwatch emits is valid against its schema file.

The documents are the commands' own output on the project's fixtures (analyze on every artifact, compare on pairs,
check's golden reports, the fleet ranking of a recorded Prometheus, verify's reports); the live tests validate theirs
with the same helper (tests/support/schemas.py). Each schema property list is also held against the dataclass it
is written from, so a field added to the code without its line in the schema fails here, naming both."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.bpf.probes.syscalls import FUTEX_OPS
from agent.cli import main
from agent.collectors.modes import BPF, PERF, PROCFS, ModeChoice
from agent.collectors.starting import LOAD_FAILED, NOT_RUNNING, UNSUPPORTED, Degraded
from agent.commands import check, diagnose, profile, verify
from agent.commands.check import CollectorCheck, WebCheck
from agent.config import MODES
from agent.diagnosis import comparison, facts, findings
from agent.diagnosis.render.json_report import COMPARISON_SCHEMA, comparison_to_json, to_json
from agent.machine.facts import BccFound, MachineFacts
from agent.machine.kernel import HeadersChoice
from agent.verification.fix import Recommendation
from agent.verification.runner import Counts, Run
from agent.verification.verdict import Verdict
from tests.support.agent import REPO
from tests.support.schemas import SCHEMAS, assert_valid, problems, schema_for, versions
from tests.unit.commands import test_check_report
from tests.unit.diagnosis import report_samples

FIXTURES = Path(__file__).parent / "fixtures"
ARTIFACTS = sorted(
    path
    for folder in (FIXTURES / "artifacts", FIXTURES / "analyze")
    for path in folder.glob("*.txt")
    if not path.name.startswith("error_")  # each of those is one line of error, exit status 2 (test_artifacts.py)
)
RETIRED = {"schedwatch.verify/v1", "schedwatch.diagnosis/v1", "schedwatch.comparison/v1"}  # no longer emitted; kept
# for documents saved before their v2
EMITTED = {findings.SCHEMA, COMPARISON_SCHEMA, check.SCHEMA, diagnose.FLEET_SCHEMA, verify.SCHEMA, profile.SCHEMA}


def _json_of(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    status = main(list(argv))
    out, err = capsys.readouterr()
    assert status == 0, f"{argv}: exit {status}: {err}"
    return json.loads(out)


def test_each_version_has_one_schema_file_and_each_file_is_draft_2020_12() -> None:
    assert versions() == EMITTED | RETIRED
    for version in versions():
        schema = schema_for(version)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_version_string_in_the_agent_has_a_schema() -> None:
    written = {
        match
        for path in (REPO / "agent").rglob("*.py")
        for match in re.findall(r"schedwatch\.[a-z_]+/v\d+", path.read_text(encoding="utf-8"))
    }
    assert written - RETIRED and written - RETIRED <= versions(), sorted(written - versions())


def test_an_unknown_version_fails_loudly() -> None:
    unknown = re.escape("no schema in docs/schemas/ declares 'schedwatch.diagnosis/v9'")
    with pytest.raises(AssertionError, match=unknown):
        assert_valid({"schema": "schedwatch.diagnosis/v9"})
    with pytest.raises(AssertionError, match="not a versioned schedwatch document"):
        assert_valid({"node": {}})


@pytest.mark.parametrize("artifact", ARTIFACTS, ids=lambda path: path.name)
def test_analyze_of_every_fixture_is_a_valid_diagnosis(capsys: pytest.CaptureFixture[str], artifact: Path) -> None:
    assert_valid(_json_of(capsys, "analyze", "--json", str(artifact)))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (["gcp_perf_trace_s.txt", "gcp_top.txt"], ["baremetal_perf_trace_s.txt"]),  # a cause on one side
        (["sick_strace_fc.txt"], ["healthy_strace_fc.txt"]),
        (["public_time_v_borg2196.txt"], ["public_perf_stat_vim1089_de.txt"]),  # no cause either side
        (["sick_mpstat.txt", "sick_vmstat.txt"], ["healthy_mpstat.txt", "healthy_vmstat.txt"]),
    ],
)
def test_compare_of_fixture_pairs_is_a_valid_comparison(
    capsys: pytest.CaptureFixture[str], a: list[str], b: list[str]
) -> None:
    folder = FIXTURES / "artifacts"
    argv = ["compare", "--json", "--a", *(str(folder / n) for n in a), "--b", *(str(folder / n) for n in b)]
    assert_valid(_json_of(capsys, *argv))


def test_the_sample_reports_are_valid() -> None:
    """The renderers' samples: processes, pools, libraries, findings with fixes, unchecked rules, observations."""
    sample = to_json(report_samples.sample_diagnosis())
    assert sample["findings"] and sample["workloads"][1]["pools"], "the sample exercises the nested parts"
    assert_valid(sample)
    assert_valid(to_json(report_samples.healthy_diagnosis()))
    assert_valid(json.loads(json.dumps(comparison_to_json(report_samples.sample_comparison()))))


@pytest.mark.parametrize("name", ["root", "unprivileged"])
def test_checks_golden_reports_are_valid(name: str) -> None:
    golden = json.loads((FIXTURES / "check" / f"{name}.json").read_text())
    assert_valid(golden)
    assert_valid(json.loads(json.dumps(check.to_json(test_check_report.REPORTS[name]()))))


def test_the_fleet_ranking_of_a_recorded_prometheus_is_valid() -> None:
    from agent.identity.filter import Filter
    from tests.unit.diagnosis.inputs.test_fleet_window import _recorded

    source, at, seconds = _recorded()
    ranking = json.loads(json.dumps(diagnose.fleet_ranking(source.node_windows(seconds, at=at), Filter(), seconds)))
    assert ranking["workloads"], "the recording ranks two workloads"
    assert_valid(ranking)


def _verify_report(mode: str, counts: Counts) -> dict[str, Any]:
    as_is = Run("as is", 1, {}, 0, 4.0, 3.0, 1.0, counts, 3)
    fixed = Run("fixed", 1, {"OMP_NUM_THREADS": "1"}, None, 2.0, None, None, counts, 3)
    report = verify.Report(
        ["python3", "-c", "pass"],
        mode,
        2.0,
        Recommendation({"OMP_NUM_THREADS": "1"}, "the diagnosis of the first run", "thread-pool-oversubscription"),
        [as_is, fixed],
        as_is,
        fixed,
        Verdict(True, 2.0, True, "stopped at the limit: at least 2x"),
    )
    document: dict[str, Any] = json.loads(json.dumps(verify.to_json(report)))
    return document


ADDED_IN_V2 = ("syscalls_by_family", "processes_exited", "page_faults")  # optional fields added within v2


def _without_v2_fields(report: dict[str, Any]) -> dict[str, Any]:
    """*report* with the run fields v2 added since v1 taken out of each run."""

    def run(entry: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in entry.items() if key not in ADDED_IN_V2}

    runs = {key: run(report[key]) for key in ("as_is", "fixed")}
    return report | runs | {"runs": [run(entry) for entry in report["runs"]]}


def test_verify_v2_carries_nulls_where_a_mode_cannot_count_and_v1_did_not() -> None:
    counted = Counts(12, dict.fromkeys(FUTEX_OPS, 3), 0.5, 1.5, 0.25)
    uncounted = Counts(None, None, None, 1.5, None)
    assert_valid(_verify_report(BPF, counted))
    procfs = _verify_report(PROCFS, uncounted)
    assert_valid(procfs)
    as_v1 = _without_v2_fields({key: value for key, value in procfs.items() if key != "mode"}) | {
        "schema": "schedwatch.verify/v1"
    }
    unknown = ("sched_yield_calls", "futex_calls", "futex_wait_seconds")
    expected = {
        f"{where}/{key}: None is not of type '{kind}'"
        for where in ("as_is", "fixed", "runs/0", "runs/1")
        for key, kind in zip(unknown, ("integer", "object", "number"), strict=True)
    }
    assert set(problems(as_v1)) == expected, "v1 promised numbers: the nulls are why v2 exists"
    bpf_v1 = _without_v2_fields({key: value for key, value in _verify_report(BPF, counted).items() if key != "mode"})
    assert problems(bpf_v1 | {"schema": "schedwatch.verify/v1"}) == [], "v1's shape: all numbers, no mode"
    assert "mode" in "".join(problems(bpf_v1 | {"schema": verify.SCHEMA})), "v2 requires the mode"


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("workloads", 0, "sched_yield_calls"), "84921956", "is not of type 'number', 'null'"),
        (("workloads", 0, "futex_calls"), {"spin": 1.0}, "'spin' is not one of"),
        (("findings", 0, "confidence"), "certain", "'certain' is not one of"),
        (("node", "unknown_fact"), 1, "Additional properties are not allowed"),
    ],
)
def test_a_document_that_strays_is_named(
    capsys: pytest.CaptureFixture[str], path: tuple[Any, ...], value: Any, says: str
) -> None:
    document = _json_of(capsys, "analyze", "--json", str(FIXTURES / "artifacts" / "gcp_perf_trace_s.txt"))
    document["workloads"][0]["futex_calls"] = {"wait": 1.0}
    assert problems(document) == []
    *parents, last = path
    target = document
    for part in parents:
        target = target[part]
    target[last] = value
    found = problems(document)
    assert len(found) == 1 and says in found[0] and found[0].startswith("/".join(map(str, parents))), found


def _properties(schema: dict[str, Any], *path: str) -> set[str]:
    node = schema
    for part in path:
        node = node[part]
    return set(node["properties"])


def _fields(cls: type) -> set[str]:
    return {field.name for field in dataclasses.fields(cls)}


DIAGNOSIS_DEFS = {
    "workload_ref": facts.Workload,
    "cpu_shares": facts.CpuShares,
    "node": facts.NodeView,
    "reclaim_counts": facts.ReclaimCounts,
    "softirq_counts": facts.SoftirqCounts,
    "code_share": facts.CodeShare,
    "thread": facts.ThreadView,
    "library": facts.LibraryView,
    "process": facts.ProcessView,
    "pool": facts.PoolView,
    "workload": facts.WorkloadView,
    "evidence": findings.Evidence,
    "fix": findings.Fix,
    "finding": findings.Finding,
    "unchecked": findings.Unchecked,
    "observation": findings.Observation,
}


@pytest.mark.parametrize("name", sorted(DIAGNOSIS_DEFS))
def test_the_diagnosis_schema_has_each_field_of_its_dataclass(name: str) -> None:
    cls = DIAGNOSIS_DEFS[name]
    declared = _properties(schema_for(findings.SCHEMA), "$defs", name)
    assert declared == _fields(cls), (
        f"docs/schemas/diagnosis.schema.json $defs/{name} vs {cls.__name__}: "
        f"add {sorted(_fields(cls) - declared)}, drop {sorted(declared - _fields(cls))}"
    )


def test_the_schemas_enums_are_the_codes() -> None:
    defs = schema_for(findings.SCHEMA)["$defs"]
    assert defs["cause"]["enum"] == [cause.value for cause in findings.Cause]
    assert defs["finding"]["properties"]["mechanism"]["enum"] == [m.value for m in findings.Mechanism]
    assert defs["finding"]["properties"]["confidence"]["enum"] == [c.value for c in findings.Confidence]
    assert defs["workload"]["properties"]["futex_calls"]["propertyNames"]["enum"] == list(FUTEX_OPS)
    run = schema_for(verify.SCHEMA)["$defs"]["run"]["properties"]
    assert run["futex_calls"]["propertyNames"]["enum"] == list(FUTEX_OPS)
    mode = schema_for(check.SCHEMA)["properties"]["mode"]["properties"]
    assert mode["mode"]["enum"] == [BPF, PERF, PROCFS] == schema_for(verify.SCHEMA)["properties"]["mode"]["enum"]
    assert mode["requested"]["enum"] == list(MODES)


def test_the_other_schemas_have_each_field_of_their_dataclasses() -> None:
    machine = schema_for(check.SCHEMA)["properties"]["machine"]
    assert set(machine["properties"]) == _fields(MachineFacts)
    headers = machine["properties"]["headers"]["anyOf"][0]
    assert set(headers["properties"]) == _fields(HeadersChoice)
    assert set(machine["properties"]["bcc"]["anyOf"][0]["properties"]) == _fields(BccFound)
    degraded = schema_for(check.SCHEMA)["properties"]["degraded"]["additionalProperties"]
    assert set(degraded["properties"]) == _fields(Degraded)
    assert degraded["properties"]["runs_as"]["enum"] == [PERF, PROCFS, NOT_RUNNING]
    assert degraded["properties"]["cause"]["enum"] == [LOAD_FAILED, UNSUPPORTED]
    assert _properties(schema_for(check.SCHEMA), "properties", "web") == _fields(WebCheck)
    assert _properties(schema_for(check.SCHEMA), "$defs", "collector") == _fields(CollectorCheck)
    assert _properties(schema_for(check.SCHEMA), "properties", "mode") == _fields(ModeChoice) | {"requested"}
    for version in (verify.SCHEMA, "schedwatch.verify/v1"):
        schema = schema_for(version)
        added = set() if version == verify.SCHEMA else set(ADDED_IN_V2)
        assert _properties(schema, "$defs", "run") == _fields(Run) - {"counts"} | _fields(Counts) - added | {
            "stopped_at_limit"
        }
        assert _properties(schema, "properties", "fix") == _fields(Recommendation)
        assert _properties(schema, "properties", "verdict") == _fields(Verdict)
    differences = schema_for(COMPARISON_SCHEMA)["properties"]["differences"]["items"]
    assert set(differences["properties"]) == _fields(comparison.Difference)


def test_every_schema_file_is_listed_in_its_page() -> None:
    page = (SCHEMAS / "README.md").read_text(encoding="utf-8")
    for path in SCHEMAS.glob("*.schema.json"):
        assert f"]({path.name})" in page, f"docs/schemas/README.md does not link {path.name}"
