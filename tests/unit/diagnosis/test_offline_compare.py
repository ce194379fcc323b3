"""`schedwatch compare` on the seed pair (GCP VM vs bare metal) and on the pair recorded here (sick vs healthy
numpy 1.26 pool): what differs, why, the cause and the fix."""

from __future__ import annotations

import pytest

from agent.diagnosis.comparison import Comparison, compare
from agent.diagnosis.findings import Cause, Mechanism
from agent.diagnosis.inputs.artifacts import read_environment
from agent.diagnosis.rules import diagnose
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"


def compared(a: list[str], b: list[str], names: tuple[str, str] = ("GCP", "bare metal")) -> Comparison:
    facts_a = read_environment([FIXTURES / name for name in a])
    facts_b = read_environment([FIXTURES / name for name in b])
    return compare(names[0], names[1], diagnose(facts_a), diagnose(facts_b))


def differences(comparison: Comparison) -> dict[str, tuple[float | None, float | None]]:
    return {difference.fact: (difference.a, difference.b) for difference in comparison.differences}


def test_seed_pair_explains_itself() -> None:
    comparison = compared(["gcp_perf_trace_s.txt", "gcp_top.txt"], ["baremetal_perf_trace_s.txt"])
    found = differences(comparison)
    # GCP: 16 of 20 threads spin (2862-2865 sit in one futex call); bare metal: 114304 spins, 37 threads parked
    assert found["threads spinning in sched_yield"] == (16, 1)
    assert found["threads parked in one futex wait"] == (4, 37)
    a_median, b_median = found["sched_yield calls per spinning thread (median)"]
    assert a_median == pytest.approx((5_434_655 + 5_475_608) / 2) and b_median == 1_599_811
    seconds = found["time in sched_yield per spinning thread (median)"]
    assert seconds[0] == pytest.approx((61.586390 + 61.269561) / 2) and seconds[1] == pytest.approx(3.995576)
    assert found["longest futex wait"] == pytest.approx((21.989789, 13.930078))
    assert found["node CPU time in the kernel (sy)"] == (43.1, None)
    why = " ".join(comparison.explanation)
    assert "In GCP 16 of 20 traced threads spun in sched_yield (median ~5.5 M calls and 61.4 s" in why
    assert "in bare metal 1 of 39 traced threads spun" in why and "37 sat parked in a single futex wait" in why
    assert "sizes its BLAS/OpenMP thread pool to the CPUs the machine shows" in why
    assert "43.1 % of its CPU time in the kernel" in why
    assert comparison.cause is not None and comparison.cause_side == "GCP"
    assert (comparison.cause.cause, comparison.cause.mechanism) == (
        Cause.THREAD_POOL_OVERSUBSCRIPTION,
        Mechanism.YIELD_STORM,
    )
    assert "OPENBLAS_NUM_THREADS" in comparison.cause.fix.summary


def test_the_order_of_the_sides_does_not_change_the_story() -> None:
    comparison = compared(
        ["baremetal_perf_trace_s.txt"], ["gcp_perf_trace_s.txt", "gcp_top.txt"], ("bare metal", "GCP")
    )
    assert comparison.cause_side == "GCP"
    assert differences(comparison)["threads spinning in sched_yield"] == (1, 16)
    assert "That is kernel time: GCP's node spent 43.1 % of its CPU time in the kernel." in comparison.explanation


def test_recorded_sick_and_healthy_runs() -> None:
    sick = ["sick_perf_trace_s.txt", "sick_top_b.txt", "sick_mpstat.txt"]
    healthy = ["healthy_perf_trace_s.txt", "healthy_top_b.txt", "healthy_mpstat.txt"]
    comparison = compared(sick, healthy, ("unset", "OPENBLAS_NUM_THREADS=1"))
    found = differences(comparison)
    # perf under-counts the storm, but the 8 pool threads still spend 0.9-3.4 s each inside sched_yield
    assert found["threads spinning in sched_yield"] == (8, 0)
    # mpstat is machine-wide, and other jobs shared the machine while the healthy run was recorded
    assert found["node CPU time in the kernel (sy)"] == (12.42, 34.42)
    assert comparison.cause_side == "unset"


def test_two_healthy_sides_name_no_cause() -> None:
    comparison = compared(["healthy_perf_trace_s.txt"], ["sleeper_perf_trace_s.txt"], ("a", "b"))
    assert comparison.cause is None
    assert "Neither side shows a contention cause" in " ".join(comparison.explanation)


def test_the_cpus_each_side_shows_are_said_when_known() -> None:
    """The seed's files do not tell the CPUs; with an mpstat on each side (2 and 4 CPUs) compare says it."""
    sick, fast = ["sick_perf_trace_s.txt", "sick_mpstat.txt"], ["healthy_perf_trace_s.txt"]
    assert not any("CPUs and" in sentence for sentence in compared(sick, fast).explanation)  # B's CPUs unknown
    comparison = compared(sick, [*fast, "public_mpstat_pcp1922_ampm.txt"], ("VM", "laptop"))
    assert "VM shows 2 CPUs and laptop 4: a pool sized to the CPUs starts 2 and 4 threads in every worker." in (
        comparison.explanation
    )
