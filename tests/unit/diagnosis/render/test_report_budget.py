"""The time budget as the reports print it: only what the facts know, and nothing when they hold no more than the
summary line's counts."""

from __future__ import annotations

from dataclasses import replace

from agent.diagnosis.facts import Workload, WorkloadView
from agent.diagnosis.render.budget import budget_lines
from tests.unit.diagnosis.report_samples import sick_workload

PLAIN = WorkloadView(ref=Workload(cgroup="/a"), seconds=10.0, runqueue_wait_seconds=1.5, futex_wait_seconds=0.5)


def test_the_sick_workloads_budget_adds_up_to_its_threads() -> None:
    lines = budget_lines(sick_workload())
    assert lines[0] == "running 19.7 s: user 12.5 s, in the kernel 7.2 s"
    assert lines[-1] == "accounted 90 s (running + waiting + blocked): 9 threads on average over 10 s"


def test_an_agent_without_the_budget_series_draws_no_budget() -> None:
    assert budget_lines(PLAIN) == ()


def test_perf_mode_facts_draw_what_they_know_and_no_total() -> None:
    """perf mode: CPU by mode and calls by family, no holder, no blocked split: no 'accounted' line."""
    view = replace(PLAIN, user_seconds=2.0, system_seconds=1.0, syscall_calls_by_family={"yield": 5e5, "futex": 0.0})
    assert budget_lines(view) == (
        "running 3 s: user 2 s, in the kernel 1 s",
        "system calls by family: yield 500,000",
        "waiting for a CPU 1.5 s",
        "blocked: futex waits 0.5 s",
    )


def test_families_beyond_the_four_busiest_are_counted_not_named() -> None:
    calls = {"yield": 6.0, "futex": 5.0, "clock": 4.0, "sleep": 3.0, "poll": 2.0, "memory": 1.0, "file": 0.0}
    (_running, line, *_rest) = budget_lines(
        replace(PLAIN, user_seconds=1.0, system_seconds=0.0, syscall_calls_by_family=calls)
    )
    assert line == "system calls by family: yield 6, futex 5, clock 4, sleep 3 (+2 more)"
