"""A diagnosis (or a comparison of two) as JSON: the documented, versioned contract of ``--json``
(docs/diagnosis.md, docs/analyze.md).

Top level: ``schema`` (:data:`~agent.diagnosis.findings.SCHEMA`), ``node``, ``workloads``, ``findings``,
``unchecked``, ``observations``, ``sources``, ``notes``. Unknown facts are ``null``, never 0. Fields are only ever
added within one schema version; a renamed or removed field makes a new version.
"""

from __future__ import annotations

from typing import Any

from agent.diagnosis.comparison import Comparison
from agent.diagnosis.findings import SCHEMA, Diagnosis
from agent.diagnosis.inputs.processes.workload import to_jsonable

COMPARISON_SCHEMA = "schedwatch.comparison/v1"


def to_json(diagnosis: Diagnosis) -> dict[str, Any]:
    """The JSON document of *diagnosis* (plain dicts, lists, strings, numbers, null)."""
    facts = diagnosis.facts
    return {
        "schema": SCHEMA,
        "node": to_jsonable(facts.node),
        "workloads": [to_jsonable(workload) for workload in facts.workloads],
        "findings": [to_jsonable(finding) for finding in diagnosis.findings],
        "unchecked": [to_jsonable(unchecked) for unchecked in diagnosis.unchecked],
        "observations": [to_jsonable(observation) for observation in diagnosis.observations],
        "sources": list(facts.sources),
        "notes": list(facts.notes),
    }


def comparison_to_json(comparison: Comparison) -> dict[str, Any]:
    """The JSON document of *comparison*: each side's diagnosis document with its name, and what differs."""
    return {
        "schema": COMPARISON_SCHEMA,
        "a": {"name": comparison.a_name, **to_json(comparison.a)},
        "b": {"name": comparison.b_name, **to_json(comparison.b)},
        "differences": to_jsonable(comparison.differences),
        "explanation": list(comparison.explanation),
        "cause": to_jsonable(comparison.cause),
        "cause_side": comparison.cause_side,
    }
