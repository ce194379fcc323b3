"""Where a report comes from, as its first lines say it: which schedwatch made it, when, with which command (the
inputs are the facts' sources)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone


@dataclass(frozen=True)
class Made:
    """Which schedwatch made a report, when (UTC, to the second), with which command."""

    version: str
    at: str  # ISO 8601, "2026-12-07T04:31:05Z"
    command: str  # "analyze", "compare", "diagnose"

    @classmethod
    def now(cls, version: str, command: str) -> Made:
        """Made by *version* running *command*, now."""
        at = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        return cls(version, at, command)

    @property
    def line(self) -> str:
        """One line for a report's head: "schedwatch 0.1.0 compare, 2026-12-07 04:31:05 UTC"."""
        return f"schedwatch {self.version} {self.command}, {self.at.replace('T', ' ').replace('Z', ' UTC')}"

    def to_json(self) -> dict[str, str]:
        """The ``made`` object of the JSON documents."""
        return {"by": f"schedwatch {self.version}", "command": self.command, "at": self.at}
