"""sched_yield and futex accounting against workloads whose behaviour is known exactly."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.machine.kernel import kernel_release, version_tuple
from tests.kernel.conftest import GRACE_SECONDS
from tests.support.agent import AgentProcess
from tests.support.scrape import Scrape, cgroup_value
from tests.support.stalls import on_cpu_seconds, run_delay_seconds
from tests.support.workloads import CgroupSandbox, Workload

FUTEX_OPS = ("wait", "wake", "requeue", "lock_pi", "waitv", "other")


@pytest.mark.parametrize(("calls", "threads"), [(1, 1), (12_345, 1), (40_000, 3), (2_500, 16)])
def test_yield_count_is_exact_per_process_and_cgroup(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path, calls: int, threads: int
) -> None:
    group = cgroups.make("yield")
    workload = Workload(yielder, group, calls, threads)
    try:
        scrape = agent.scrape()
        expected = calls * threads
        assert workload.truth["yields"] == expected
        assert cgroup_value(scrape, "schedwatch_sched_yield_calls_total", cgroups.relative(group)) == expected
        per_process = scrape.value("schedwatch_process_sched_yield_calls_total", pid=str(workload.pid))
        assert per_process == expected
        assert scrape.find("schedwatch_process_sched_yield_calls_total", pid=str(workload.pid))
        labels = dict(next(iter(scrape.find("schedwatch_process_sched_yield_calls_total", pid=str(workload.pid)))))
        assert labels["comm"] == "yielder"
        assert labels["cgroup"] == cgroups.relative(group)
    finally:
        workload.release()


def test_futex_calls_by_op_and_wait_time(agent: AgentProcess, cgroups: CgroupSandbox, futexer: Path) -> None:
    group = cgroups.make("futex")
    wait_ns, waits, wakes = 20_000_000, 12, 9
    workload = Workload(futexer, group, waits, wait_ns, wakes)
    try:
        truth = workload.truth
        assert truth["wait_errors"] == 0, "every timed wait should have timed out"
        # futex2's futex_wait/wake/requeue came in Linux 6.7: where the kernel has them the workload made them.
        assert truth["futex2"] == int(version_tuple(kernel_release())[:2] >= (6, 7)), truth
        waits = truth["wait"] + truth["waitv"]  # less futex2's futex_wait on kernels before 6.7 (truth["futex2"] 0)
        scrape = agent.scrape()
        path = cgroups.relative(group)
        for op in FUTEX_OPS:
            got = cgroup_value(scrape, "schedwatch_futex_calls_total", path, op=op)
            assert got == truth[op], f"op={op}: exported {got}, workload made {truth[op]}"
            per_process = scrape.value("schedwatch_process_futex_calls_total", pid=str(workload.pid), op=op)
            assert per_process == truth[op], f"per-process op={op}"

        # A timed-out waiter is woken when the machine gets to it: on a loaded machine each 20 ms wait can take
        # far longer. The ground truth is the time user space measured around each call, which holds the
        # kernel-side span; at least the requested time passed in each. What user space measured beyond the
        # kernel's span its threads spent outside the call, on a CPU (clock reads, entry and exit) or waiting for
        # one (a loaded or emulated machine): the kernel counts both, so the gap can be no larger than they are.
        requested_seconds = waits * wait_ns / 1e9
        measured_seconds = truth["waited_ns"] / 1e9
        outside_the_call = on_cpu_seconds(workload.pid) + run_delay_seconds(workload.pid)
        exported = cgroup_value(scrape, "schedwatch_futex_wait_seconds_total", path)
        assert exported <= measured_seconds, "kernel-side time cannot exceed what user space measured"
        assert measured_seconds - exported <= outside_the_call, (measured_seconds, exported, outside_the_call)
        assert exported >= requested_seconds * 0.99
        process_seconds = scrape.value("schedwatch_process_futex_wait_seconds_total", pid=str(workload.pid))
        assert process_seconds == pytest.approx(exported, abs=1e-9)

        # The histogram agrees with the counter and with the number of timed waits.
        count = cgroup_value(scrape, "schedwatch_futex_wait_duration_seconds_count", path)
        total = cgroup_value(scrape, "schedwatch_futex_wait_duration_seconds_sum", path)
        assert count == waits
        assert total == pytest.approx(exported, abs=1e-9)
        assert cgroup_value(scrape, "schedwatch_futex_wait_duration_seconds_bucket", path, le="0.01") == 0
        # A wait user space saw end within 100 ms took less than that in the kernel too.
        under_100ms = cgroup_value(scrape, "schedwatch_futex_wait_duration_seconds_bucket", path, le="0.1")
        assert waits - truth["slow_waits"] <= under_100ms <= waits
        assert cgroup_value(scrape, "schedwatch_futex_wait_duration_seconds_bucket", path, le="+Inf") == waits
    finally:
        workload.release()


def test_counts_land_in_their_own_cgroup_only(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path, futexer: Path
) -> None:
    first, second = cgroups.make("first"), cgroups.make("second")
    yields = Workload(yielder, first, 7_777, 2)
    futexes = Workload(futexer, second, 4, 1_000_000, 5)
    try:
        scrape = agent.scrape()
        a, b = cgroups.relative(first), cgroups.relative(second)
        assert cgroup_value(scrape, "schedwatch_sched_yield_calls_total", a) == 15_554
        assert cgroup_value(scrape, "schedwatch_sched_yield_calls_total", b) == 0
        assert cgroup_value(scrape, "schedwatch_futex_calls_total", b, op="wake") == 5
        assert cgroup_value(scrape, "schedwatch_futex_calls_total", b, op="wait") == futexes.truth["wait"]
        # The yielder's own futex calls (pthread_join) stay in its cgroup: none are waits of 1 ms.
        assert cgroup_value(scrape, "schedwatch_futex_wait_duration_seconds_count", a) < 4
        assert cgroup_value(scrape, "schedwatch_futex_calls_total", a, op="waitv") == 0
    finally:
        yields.release()
        futexes.release()


def test_exited_process_keeps_its_counts_and_counters_never_go_backwards(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    group = cgroups.make("exits")
    path = cgroups.relative(group)
    previous = agent.scrape()
    total = 0
    for round_number in range(1, 6):
        # Each workload starts, yields and exits between two scrapes.
        workload = Workload(yielder, group, 1_000 * round_number, 2, hold=False)
        total += workload.truth["yields"]
        current = agent.scrape()
        assert cgroup_value(current, "schedwatch_sched_yield_calls_total", path) == total
        assert current.value("schedwatch_process_sched_yield_calls_total", pid=str(workload.pid)) is None
        assert_monotonic(previous, current)
        previous = current


def test_removed_cgroup_keeps_counting_then_expires(agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path) -> None:
    group = cgroups.make("removed")
    path = cgroups.relative(group)
    Workload(yielder, group, 3_333, 1, hold=False)
    scrape = agent.scrape()
    assert cgroup_value(scrape, "schedwatch_sched_yield_calls_total", path) == 3_333
    # The sched program's totals too (a workload slot, or its hash entry): its switches left off-CPU time.
    offcpu = scrape.find("schedwatch_offcpu_seconds_total", cgroup=path, container_id="")
    assert offcpu, "the yielder's switches are counted by the sched program"
    cgroups.remove(group)
    # Still exported, with the same value, during the grace period...
    assert cgroup_value(agent.scrape(), "schedwatch_sched_yield_calls_total", path) == 3_333
    time.sleep(GRACE_SECONDS + 0.5)
    # ...and gone after it, from every collector (the sched program's slot is not read again once forgotten).
    left = sorted({name for name, labels in agent.scrape().samples if ("cgroup", path) in labels})
    assert left == [], f"series of the removed cgroup still exported after the grace period: {left}"


def test_cgroup_removed_before_any_scrape_is_not_lost(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    # "(removed)" exists only once something was counted there: absent before means nothing yet.
    before = agent.scrape().value("schedwatch_sched_yield_calls_total", cgroup="(removed)") or 0.0
    group = cgroups.make("ephemeral")
    Workload(yielder, group, 4_321, 1, hold=False)
    cgroups.remove(group)
    after = agent.scrape()
    assert after.value("schedwatch_sched_yield_calls_total", cgroup=cgroups.relative(group)) is None
    assert cgroup_value(after, "schedwatch_sched_yield_calls_total", "(removed)") - before == 4_321


def assert_monotonic(previous: Scrape, current: Scrape) -> None:
    """Every counter (and histogram part) present in both scrapes did not decrease."""
    for (name, labels), value in previous.samples.items():
        if not name.startswith("schedwatch_") or not (
            name.endswith("_total") or name.endswith("_bucket") or name.endswith("_count") or name.endswith("_sum")
        ):
            continue
        if name.startswith("schedwatch_process_"):
            continue  # per-process series belong to a pid, which can be reused
        now = current.samples.get((name, labels))
        if now is not None:
            assert now >= value, f"{name}{dict(labels)} went from {value} to {now}"
