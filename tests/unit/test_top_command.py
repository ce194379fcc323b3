"""`schedwatch top`'s flags: a bad value is one usage line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (("--interval", "0.1"), "argument --interval: 0.1 s is out of range: give 0.5 to 60"),
        (("--interval", "soon"), "argument --interval: 'soon' is not a number of seconds"),
        (("--sort", "colour"), "argument --sort: invalid choice: 'colour'"),
        (("--listen", ":1"), "top serves nothing; it is `schedwatch run`'s flag"),
    ],
)
def test_bad_flags_are_one_usage_line(arguments: tuple[str, ...], says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "top", *arguments], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert says in result.stderr.splitlines()[-1], result.stderr
