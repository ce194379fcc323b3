"""The recipe "Adding a cause" (docs/diagnosis-rules.md) as a test: a cause or mechanism added to the findings'
enums without one of its steps fails here, naming the step, as test_artifact_formats.py does for a format's row.

The steps: a rule module under agent/diagnosis/rules/ that builds a finding with it and a fix; its module wired into
rules/__init__.py; its thresholds in Thresholds, each with the measurement that set it (a comment with a number) and
read by a rule; a row per mechanism in the causes table and the cause in the JSON list of docs/diagnosis-rules.md;
the schema's enums (tests/unit/test_schemas.py); a unit test that names it.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from agent.diagnosis.findings import Cause, Mechanism
from agent.diagnosis.rules.thresholds import Thresholds
from tests.support.agent import REPO
from tests.unit.locations import UNIT

RULES = REPO / "agent" / "diagnosis" / "rules"
DOCS = REPO / "docs" / "diagnosis-rules.md"


def rule_modules() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted(RULES.glob("*.py")) if path.stem != "__init__"}


def test_each_cause_and_mechanism_is_built_by_a_rule_module_with_a_fix() -> None:
    modules = rule_modules()
    for cause in Cause:
        building = [name for name, text in modules.items() if f"Cause.{cause.name}" in text]
        assert building, f"step 1: no module of agent/diagnosis/rules/ builds a finding of {cause.value}"
        assert any("Fix(" in modules[name] or "_fix(" in modules[name] for name in building), (
            f"step 1: the rule of {cause.value} gives no fix"
        )
    for mechanism in Mechanism:
        assert any(f"Mechanism.{mechanism.name}" in text for text in modules.values()), (
            f"step 1: no rule module names Mechanism.{mechanism.name}"
        )


def test_each_rule_module_that_builds_a_finding_is_called_by_the_rules() -> None:
    wiring = (RULES / "__init__.py").read_text()
    for name, text in rule_modules().items():
        if re.search(r"cause=Cause\.|Finding\(", text) and name not in ("common", "next_steps"):
            assert re.search(rf"\b{name}\.\w+\(", wiring), f"step 2: rules/__init__.py never calls {name}"


def test_each_threshold_has_its_measurement_and_a_reader() -> None:
    source = (RULES / "thresholds.py").read_text()
    tree = ast.parse(source)
    (klass,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Thresholds"]
    lines = source.splitlines()
    readers = "\n".join(text for name, text in rule_modules().items() if name != "thresholds")
    for field in dataclasses.fields(Thresholds):
        (node,) = [item for item in klass.body if isinstance(item, ast.AnnAssign) and item.target.id == field.name]  # type: ignore[union-attr]
        index = node.lineno - 2
        while index >= 0 and lines[index].strip() and not lines[index].strip().startswith("#"):
            index -= 1  # a field in a run of fields shares the comment above the run
        above = []
        while index >= 0 and lines[index].strip().startswith("#"):
            above.append(lines[index])
            index -= 1
        comments = " ".join([*above, lines[node.lineno - 1].partition("#")[2]])
        assert re.search(r"\d", comments), f"step 3: Thresholds.{field.name} has no comment with its measurement"
        read = f"limits.{field.name}" in readers or f'"{field.name}"' in readers  # by name: getattr(limits, ...)
        assert read, f"step 3: no rule reads Thresholds.{field.name}"


def test_each_cause_and_mechanism_has_its_row_in_the_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    table = text.split("## Causes and mechanisms", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (?:`(?P<cause>[a-z-]+)`)? *\| `(?P<mechanism>[a-z-]+)` \|", table, re.MULTILINE)
    assert {cause for cause, _ in rows if cause} >= {cause.value for cause in Cause}, "step 4: a cause has no row"
    assert {mechanism for _, mechanism in rows} == {m.value for m in Mechanism}, "step 4: a mechanism has no row"
    listed = text.split("The causes:", 1)[1].split(".", 1)[0]
    for cause in Cause:
        assert f"`{cause.value}`" in listed, f"step 4: {cause.value} is not in the JSON section's list of causes"


def test_each_cause_is_named_by_a_unit_test() -> None:
    tests = "\n".join(path.read_text() for path in UNIT.rglob("test_*.py") if path.name != Path(__file__).name)
    for cause in Cause:
        assert f"Cause.{cause.name}" in tests or f'"{cause.value}' in tests, f"step 6: no unit test names {cause.value}"
