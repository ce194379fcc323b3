"""Whether the fix helps: faster, or as fast with the contention it targets gone."""

from __future__ import annotations

from dataclasses import dataclass

from agent.verification.runner import Run

MIN_SPEEDUP = 1.05  # the fix helps when the wall time falls by at least 5 % ...
# ... or, wall time no worse than this, when the contention it removes was real and is mostly gone.
MAX_SLOWDOWN = 0.95
CONTENTION_GONE = 0.5  # run-queue wait and yields: at most half of what they were
YIELDS_PER_SECOND_REAL = 1_000.0
RUNQ_PER_SECOND_REAL = 0.1  # seconds of run-queue wait per second of wall time


@dataclass(frozen=True)
class Verdict:
    """Whether the fix helps, and why."""

    helps: bool
    speedup: float | None  # as-is wall / fixed wall; a lower bound when the first run was stopped
    speedup_is_lower_bound: bool
    reason: str


def judge(first: Run, fixed: Run) -> Verdict:
    """Helps: at least 5 % faster, or no slower while the contention it targets (yields, run-queue wait) was real
    and is mostly gone."""
    if fixed.stopped:
        return Verdict(False, None, False, "the fixed run was stopped at the duration limit")
    speedup = first.wall_seconds / fixed.wall_seconds if fixed.wall_seconds > 0 else None
    lower_bound = first.stopped
    if fixed.exit_status != 0 and first.exit_status == 0:  # failing fast is not being faster
        statuses = f"exit status {first.exit_status} as is, {fixed.exit_status} fixed"
        return Verdict(False, speedup, lower_bound, f"the fixed run failed ({statuses})")
    if speedup is not None and speedup >= MIN_SPEEDUP:
        return Verdict(True, speedup, lower_bound, f"{fold(speedup, lower_bound)} faster")
    gone = [name for name, was, now in _contention(first, fixed) if now <= CONTENTION_GONE * was]
    if speedup is not None and speedup >= MAX_SLOWDOWN and gone:
        return Verdict(True, speedup, lower_bound, f"about as fast, and {' and '.join(gone)} mostly gone")
    slower = "not faster" if speedup is None or speedup >= MAX_SLOWDOWN else "slower"
    removed = f"though {' and '.join(gone)} mostly gone" if gone else "no contention removed"
    return Verdict(False, speedup, lower_bound, f"{slower} ({fold(speedup, lower_bound)}), {removed}")


def _contention(first: Run, fixed: Run) -> list[tuple[str, float, float]]:
    """(what, per second as is, per second fixed) for the contention that was real in the first run."""
    found = []
    yields_as_is, yields_fixed = first.counts.sched_yield_calls, fixed.counts.sched_yield_calls
    if yields_as_is is not None and yields_fixed is not None:  # counted in this mode
        yields_before = yields_as_is / first.wall_seconds
        if yields_before >= YIELDS_PER_SECOND_REAL:
            found.append(("sched_yield calls", yields_before, yields_fixed / fixed.wall_seconds))
    runq_before = (first.counts.runqueue_wait_seconds or 0.0) / first.wall_seconds
    if runq_before >= RUNQ_PER_SECOND_REAL and fixed.counts.runqueue_wait_seconds is not None:
        found.append(("run-queue wait", runq_before, fixed.counts.runqueue_wait_seconds / fixed.wall_seconds))
    return found


def fold(speedup: float | None, lower_bound: bool) -> str:
    if speedup is None:
        return "speed-up unknown"
    return f"{'at least ' if lower_bound else ''}{speedup:.2f}x"
