"""A saved ``schedwatch diagnose --json`` report -> the facts it was made from (its ``node``, ``workloads``,
``sources`` and ``notes``; the inverse of :func:`agent.diagnosis.render.json_report.to_json` for the facts).

The report holds the facts as plain JSON (dataclasses as objects, tuples as lists, enums as their values); this
module rebuilds the view dataclasses from the field types, so a report from one version reads back as the same
facts. Unknown members are ignored, missing ones take the field's default, a value of the wrong kind is an error.

Unlike the tools' outputs, what this format holds is already the facts of a whole environment: :func:`parse` gives
:class:`~agent.diagnosis.facts.Facts`, and :func:`to_facts` returns them as they are (not a
:class:`~.part.Part` to merge), so the report stands alone.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Union

from agent.diagnosis.facts import Facts
from agent.diagnosis.findings import SCHEMA
from agent.diagnosis.inputs.artifacts.errors import ArtifactError, NotThisFormat, prints_no_error

__all__ = ["FORMAT", "ReportUnusable", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "schedwatch diagnose --json"
SCHEMA_PREFIX = "schedwatch."  # any report of schedwatch: the wrong kind or version gets its own error
READ = ("schedwatch.diagnosis/v1", SCHEMA)  # v1 wrote "" for a workload's unknown names, v2 null: both read back
SAVE_AGAIN = f"give a {SCHEMA} report, as this schedwatch's `schedwatch diagnose --json` saves it"


class ReportUnusable(ArtifactError):
    """The text is a schedwatch report that cannot be read back (say why in one line)."""

    advice = SAVE_AGAIN


def looks_like(text: str) -> bool:
    """A JSON object whose ``schema`` names a schedwatch report (any kind, any version)."""
    return _report(text) is not None


# schedwatch never saves an error message in place of its report
looks_like_error = prints_no_error


def _report(text: str) -> dict[str, Any] | None:
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(data, dict) and str(data.get("schema", "")).startswith(SCHEMA_PREFIX):
        return data
    return None


def parse(text: str) -> Facts:
    """The facts of the report *text*; raises NotThisFormat (not a schedwatch report) or ReportUnusable."""
    data = _report(text)
    if data is None:
        raise NotThisFormat(FORMAT, "not a JSON object whose schema names a schedwatch report")
    if data.get("schema") not in READ:
        raise ReportUnusable(f"a {data.get('schema')} report")
    members = {name: data.get(name) for name in ("node", "workloads", "sources", "notes")}
    if not isinstance(members["node"], dict) or not isinstance(members["workloads"], list):
        raise ReportUnusable("the report has no 'node' object or no 'workloads' list")
    try:
        facts = decode(Facts, {name: value for name, value in members.items() if value is not None})
    except (TypeError, ValueError, KeyError) as error:
        raise ReportUnusable(f"its facts do not read back ({error})") from None
    assert isinstance(facts, Facts)
    return facts


def to_facts(facts: Facts, source: str) -> Facts:
    """The report's facts as they are: a whole environment (its sources are those it names, not *source*)."""
    return facts


def decode(kind: Any, value: Any) -> Any:
    """*value* (plain JSON) as an instance of the type *kind* (a view dataclass, a tuple, a union, a scalar)."""
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        options = [option for option in typing.get_args(kind) if option is not type(None)]
        if len(options) != 1:
            raise TypeError(f"cannot decode a value of {kind}")
        return decode(options[0], value)
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        if not isinstance(value, dict):
            raise TypeError(f"{kind.__name__}: an object expected, got {type(value).__name__}")
        hints = typing.get_type_hints(kind)
        known = {field.name for field in dataclasses.fields(kind) if field.init}
        return kind(
            **{
                name: decode(hints[name], item)
                for name, item in value.items()
                if name in known and (item is not None or _optional(hints[name]))  # null where none may be: default
            }
        )
    if origin is tuple:
        return _tuple(kind, value)
    if origin is dict:
        key_kind, item_kind = typing.get_args(kind)
        if not isinstance(value, dict):
            raise TypeError(f"an object expected, got {type(value).__name__}")
        return {decode(key_kind, key): decode(item_kind, item) for key, item in value.items()}
    return _scalar(kind, value)


def _optional(kind: Any) -> bool:
    """Whether *kind* admits None."""
    return typing.get_origin(kind) in (Union, types.UnionType) and type(None) in typing.get_args(kind)


def _tuple(kind: Any, value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list):
        raise TypeError(f"a list expected, got {type(value).__name__}")
    args = typing.get_args(kind)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(decode(args[0], item) for item in value)
    if len(args) != len(value):
        raise ValueError(f"{len(args)} items expected, got {len(value)}")
    return tuple(decode(arg, item) for arg, item in zip(args, value, strict=True))


def _scalar(kind: Any, value: Any) -> Any:
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind in (int, str, bool) and type(value) is kind:
        return value
    raise TypeError(f"a {getattr(kind, '__name__', kind)} expected, got {value!r:.40}")
