"""Where the unit tests' recorded inputs are, for a test module at any depth of tests/unit/."""

from __future__ import annotations

from pathlib import Path

UNIT = Path(__file__).resolve().parent
UNIT_FIXTURES = UNIT / "fixtures"
