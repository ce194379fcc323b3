"""How `schedwatch verify` decides whether a fix helps, on the two runs' numbers (no root needed)."""

from __future__ import annotations

import pytest

from agent.verification.runner import Counts, Run
from agent.verification.verdict import judge


def run(wall: float, yields: int = 0, runq: float = 0.0, status: int | None = 0) -> Run:
    counts = Counts(yields, {"wait": 0, "wake": 0}, 0.0, runq, 0.0)
    return Run("as is", 1, {}, status, wall, wall / 2, 0.1, counts, 4)


@pytest.mark.parametrize(
    ("as_is", "fixed", "helps", "reason"),
    [
        (run(6.33, yields=5_000_000), run(4.58), True, "1.38x faster"),
        (run(10.0), run(9.6), False, "not faster (1.04x), no contention removed"),
        (run(10.0), run(11.0), False, "slower (0.91x), no contention removed"),
        # The storm is gone but the command got slower: not a help, and the reason says what did change.
        (run(10.0, yields=1_000_000), run(11.0), False, "slower (0.91x), though sched_yield calls mostly gone"),
        # As fast, but a storm of 100 k yields/s is gone: the CPU it burnt is free for others.
        (run(10.0, yields=1_000_000), run(10.2), True, "about as fast, and sched_yield calls mostly gone"),
        (run(10.0, runq=20.0), run(10.0, runq=3.0), True, "about as fast, and run-queue wait mostly gone"),
        # Too little to count as contention: noise in a healthy command's run-queue wait.
        (run(10.0, runq=0.5), run(10.0, runq=0.1), False, "not faster (1.00x), no contention removed"),
        (run(10.0, yields=1_000_000), run(10.0, yields=900_000), False, "not faster (1.00x), no contention removed"),
        (run(60.0, status=None), run(20.0), True, "at least 3.00x faster"),
        (run(10.0), run(60.0, status=None), False, "the fixed run was stopped at the duration limit"),
        (
            run(10.0, yields=1_000_000),
            run(10.0, status=1),
            False,
            "the fixed run failed (exit status 0 as is, 1 fixed)",
        ),
    ],
)
def test_verdict(as_is: Run, fixed: Run, helps: bool, reason: str) -> None:
    verdict = judge(as_is, fixed)
    assert (verdict.helps, verdict.reason) == (helps, reason)
