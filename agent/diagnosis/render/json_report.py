"""A diagnosis (or a comparison of two) as JSON: the documented, versioned contract of ``--json``
(docs/diagnosis.md, docs/analyze.md, docs/schemas/).

Top level: ``schema`` (:data:`~agent.diagnosis.findings.SCHEMA`), ``made`` (which schedwatch, which command, when),
``node``, ``workloads``, ``findings``, ``unchecked``, ``observations``, ``sources``, ``notes``. Unknown facts are
``null``, never 0, and so is a workload's name its source does not give (never ``""``); a whole number is written as
one (``"threads": 20``, not ``20.0``).
Fields are only ever added within one schema version; a renamed or removed field, or a changed type, makes a new
version.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from agent.diagnosis.comparison import Comparison
from agent.diagnosis.facts import Workload
from agent.diagnosis.findings import SCHEMA, Diagnosis
from agent.diagnosis.inputs.processes.workload import to_jsonable
from agent.diagnosis.render.provenance import Made

COMPARISON_SCHEMA = "schedwatch.comparison/v2"
WORKLOAD_KEYS = frozenset(field.name for field in dataclasses.fields(Workload))


def plain(value: Any) -> Any:
    """*value* (plain JSON) as the contract writes it: a whole float as an integer, a workload's name that its
    source does not give (its labels' "") as null."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    if isinstance(value, dict):
        if value.keys() == WORKLOAD_KEYS:
            return {key: item or None for key, item in value.items()}
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def _made(made: Made | None) -> dict[str, str] | None:
    return None if made is None else made.to_json()


def _diagnosis(diagnosis: Diagnosis) -> dict[str, Any]:
    facts = diagnosis.facts
    return {
        "node": to_jsonable(facts.node),
        "workloads": [to_jsonable(workload) for workload in facts.workloads],
        "findings": [to_jsonable(finding) for finding in diagnosis.findings],
        "unchecked": [to_jsonable(unchecked) for unchecked in diagnosis.unchecked],
        "observations": [to_jsonable(observation) for observation in diagnosis.observations],
        "sources": list(facts.sources),
        "notes": list(facts.notes),
    }


def to_json(diagnosis: Diagnosis, made: Made | None = None) -> dict[str, Any]:
    """The JSON document of *diagnosis* (plain dicts, lists, strings, numbers, null)."""
    document: dict[str, Any] = plain({"schema": SCHEMA, "made": _made(made), **_diagnosis(diagnosis)})
    return document


def comparison_to_json(comparison: Comparison, made: Made | None = None) -> dict[str, Any]:
    """The JSON document of *comparison*: which side is slow, each side's diagnosis with its name, what differs,
    why, and the cause."""
    document: dict[str, Any] = plain(
        {
            "schema": COMPARISON_SCHEMA,
            "made": _made(made),
            "slower": to_jsonable(comparison.slower),
            "a": {"name": comparison.a_name, "schema": SCHEMA, "made": _made(made), **_diagnosis(comparison.a)},
            "b": {"name": comparison.b_name, "schema": SCHEMA, "made": _made(made), **_diagnosis(comparison.b)},
            "differences": to_jsonable(comparison.differences),
            "explanation": list(comparison.explanation),
            "cause": to_jsonable(comparison.cause),
            "cause_side": comparison.cause_side,
        }
    )
    return document
