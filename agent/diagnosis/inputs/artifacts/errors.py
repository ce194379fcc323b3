"""The ways reading an artifact can fail, each its own exception, and what the user does about each.

- :class:`NotThisFormat`: the text is empty or is not output of the tool asked for (try another parser).
- :class:`CommandFailed`: it is the tool's output, but the tool printed an error instead of a report
  (``strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted``).
- :class:`Malformed`: the report is recognised but broken (cut short, a row that does not parse), with the
  line number, counted as the file shows lines.

A file that cannot be read at all raises :class:`Unreadable`. Each error's :attr:`~ArtifactError.advice` says what
to do; ``analyze`` prints it after the message, on the same line.
"""

from __future__ import annotations

GIVE_WHOLE = "give the tool's whole output, as it printed it"
RUN_AGAIN = "fix what the tool said and save its report again"


def prints_no_error(text: str) -> bool:
    """A format's ``looks_like_error`` when its tool prints no error message of its own into the report: never."""
    return False


class ArtifactError(Exception):
    """Base of every error raised while reading an artifact."""

    advice = GIVE_WHOLE  # what the user does about it: a format's own errors may say something else


class Unreadable(ArtifactError):
    """The file itself could not be read (missing, a directory, unreadable, too large)."""


class NotThisFormat(ArtifactError):
    """The text is empty or not in the format asked for."""

    def __init__(self, fmt: str, reason: str) -> None:
        super().__init__(f"not {fmt} output: {reason}")
        self.fmt = fmt
        self.reason = reason


class CommandFailed(ArtifactError):
    """The tool ran and printed an error instead of its report; *message* is the tool's own line."""

    advice = RUN_AGAIN

    def __init__(self, fmt: str, message: str, line: int) -> None:
        super().__init__(f"{fmt} printed an error instead of a report (line {line}): {message}")
        self.fmt = fmt
        self.message = message
        self.line = line


class Malformed(ArtifactError):
    """Recognised as *fmt*, but line *line* (1-based) breaks the format."""

    def __init__(self, fmt: str, line: int, reason: str) -> None:
        super().__init__(f"{fmt} output, line {line}: {reason}")
        self.fmt = fmt
        self.line = line
        self.reason = reason
