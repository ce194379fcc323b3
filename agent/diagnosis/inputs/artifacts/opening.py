"""How every table-shaped report opens: empty, the tool's own error message, not this format, or its lines."""

from __future__ import annotations

from collections.abc import Callable

from agent.diagnosis.inputs.artifacts.errors import CommandFailed, NotThisFormat
from agent.diagnosis.inputs.artifacts.text import Line, lines, meaningful


def report_lines(
    text: str, fmt: str, recognised: Callable[[str], bool], is_error: Callable[[str], bool], missing: str
) -> list[Line]:
    """The meaningful lines of a *fmt* report in *text*.

    Raises NotThisFormat when the text is empty or *recognised* says it is not *fmt* (with *missing*: what was
    looked for), and CommandFailed when its first line is the tool's own error message (*is_error*).
    """
    rows = meaningful(lines(text))
    if not rows:
        raise NotThisFormat(fmt, "the text is empty")
    if not recognised(text):
        first = rows[0].text.strip()
        if is_error(first):
            raise CommandFailed(fmt, first, rows[0].number)
        raise NotThisFormat(fmt, missing)
    return rows


def is_error_message(text: str, recognised: Callable[[str], bool], is_error: Callable[[str], bool]) -> bool:
    """True when *text* holds no report and its first line is the tool's own error message."""
    rows = meaningful(lines(text))
    return bool(rows) and not recognised(text) and is_error(rows[0].text.strip())
