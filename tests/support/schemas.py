"""The JSON contracts in docs/schemas/: each emitted document is checked against the schema its ``schema`` field
names. A version no file declares fails loudly, as does every way a document strays from its schema."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.support.agent import REPO

SCHEMAS = REPO / "docs" / "schemas"


@functools.cache
def _loaded() -> tuple[Registry, dict[str, dict[str, Any]]]:
    """Every schema file by its ``$id`` (for references between them) and by the version its ``schema`` const is."""
    registry: Registry = Registry()
    by_version: dict[str, dict[str, Any]] = {}
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        Draft202012Validator.check_schema(schema)
        registry = registry.with_resource(schema["$id"], Resource.from_contents(schema))
        version = version_of(schema)
        assert version not in by_version, f"{path.name} and another file both declare {version}"
        by_version[version] = schema
    return registry, by_version


def version_of(schema: dict[str, Any]) -> str:
    """The ``schema`` value a document of *schema* carries (its title says the same)."""
    properties = schema.get("properties") or schema["$defs"]["report"]["properties"]
    version: str = properties["schema"]["const"]
    assert schema["title"] == version, f"{schema['$id']}: title {schema['title']!r} is not its version {version!r}"
    return version


def versions() -> set[str]:
    """Every contract version that has a schema file."""
    return set(_loaded()[1])


def schema_for(version: str) -> dict[str, Any]:
    """The schema of *version*; fails naming the versions known when none declares it."""
    by_version = _loaded()[1]
    assert version in by_version, f"no schema in docs/schemas/ declares {version!r} (known: {sorted(by_version)})"
    return by_version[version]


def problems(document: Any) -> list[str]:
    """Every way *document* strays from the schema its ``schema`` field names, one line each (empty: valid)."""
    assert isinstance(document, dict) and isinstance(document.get("schema"), str), (
        f"not a versioned schedwatch document (no 'schema' string): {str(document)[:200]}"
    )
    registry, _ = _loaded()
    validator = Draft202012Validator(schema_for(document["schema"]), registry=registry)
    return [
        f"{'/'.join(str(part) for part in error.absolute_path) or '(top)'}: {error.message}"
        for error in sorted(validator.iter_errors(document), key=lambda error: list(map(str, error.absolute_path)))
    ]


def assert_valid(document: Any) -> None:
    """Fail, listing every problem, unless *document* is valid against the schema its ``schema`` field names."""
    found = problems(document)
    assert not found, f"{document.get('schema')} document strays from docs/schemas/:\n  " + "\n  ".join(found[:40])


def schema_path(version: str) -> Path:
    """The file that declares *version*."""
    return SCHEMAS / Path(schema_for(version)["$id"]).name
