"""The time budget's live facts from recorded /metrics of a real agent (fixtures/metrics/README.md): calls and
seconds by family, pressure, and unknown (None) wherever the series cannot tell, never 0."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.diagnosis.facts import Workload, WorkloadView
from agent.diagnosis.inputs.live.budget_inputs import with_budget_inputs
from agent.diagnosis.inputs.live.window import Window, workload_view
from agent.machine.syscall_families import FAMILIES
from agent.series.reading import Reading, read_families
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "metrics"
BEFORE = (FIXTURES / "budget-before.txt").read_text()
AFTER = (FIXTURES / "budget-after.txt").read_text()
MEASURED = Workload(cgroup="/schedwatch-test-22077-3bcc91/budget-83a0d5")
EMPTY = Workload(cgroup="/schedwatch-test-22077-3bcc91/budget-empty-53b539")
# syscaller's calls (README), and its fixed ones: what the empty run made (3 file, 2 other).
MADE = {"clock": 3000, "sleep": 200, "memory": 1000, "process": 40, "file": 3, "other": 7000 + 20 + 2}


def reading(text: str, at: float) -> Reading:
    return read_families(text_string_to_metric_families(text), at)


def view(ref: Workload, before: str = BEFORE, after: str = AFTER) -> WorkloadView:
    window = Window(reading(before, 10.0), reading(after, 11.0))
    return with_budget_inputs(window, workload_view(window, ref, 2))


def test_calls_by_family_are_the_workloads_exact_counts_and_zero_for_families_without_calls() -> None:
    measured = view(MEASURED)
    assert measured.syscall_calls_by_family == {family: float(MADE.get(family, 0)) for family in FAMILIES}
    assert view(EMPTY).syscall_calls_by_family == {
        family: {"file": 3.0, "other": 2.0}.get(family, 0.0) for family in FAMILIES
    }


def test_seconds_by_family_are_the_timed_series() -> None:
    seconds = view(MEASURED).syscall_seconds_by_family
    assert seconds is not None and set(seconds) == set(FAMILIES)
    assert seconds["sleep"] == pytest.approx(0.420176546, abs=1e-12)
    assert seconds["yield"] == 0.0
    assert seconds["sleep"] >= 200 * 0.002  # 200 nanosleeps of 2 ms


def test_pressure_totals_grow_over_the_window() -> None:
    measured = view(MEASURED)
    assert measured.pressure_waiting_seconds == pytest.approx({"cpu": 0.005608, "memory": 0.0, "io": 0.0})
    assert measured.pressure_stalled_seconds == pytest.approx({"cpu": 0.00536, "memory": 0.0, "io": 0.0})
    # A cgroup with no pressure series (the empty run never stalled, so none was exported) is unknown.
    assert view(EMPTY).pressure_waiting_seconds is None


def test_a_window_over_the_same_scrape_grows_nothing() -> None:
    same = view(MEASURED, AFTER, AFTER)
    assert same.syscall_calls_by_family == dict.fromkeys(FAMILIES, 0.0)
    assert same.pressure_waiting_seconds == {"cpu": 0.0, "memory": 0.0, "io": 0.0}


def test_without_the_families_collector_counts_and_seconds_are_unknown_not_zero() -> None:
    down = 'schedwatch_source_up{source="syscall_families"} 1.0'
    assert down in AFTER
    text = AFTER.replace(down, 'schedwatch_source_up{source="syscall_families"} 0.0')
    stripped = "\n".join(line for line in text.splitlines() if not line.startswith("schedwatch_syscall"))
    measured = view(MEASURED, BEFORE, stripped)
    assert measured.syscall_calls_by_family is None
    assert measured.syscall_seconds_by_family is None


def test_a_workload_not_timed_through_the_window_has_no_seconds_by_family() -> None:
    timed = f'schedwatch_syscall_timed{{container_id="",container="",pod="",namespace="",cgroup="{MEASURED.cgroup}"}}'
    assert f"{timed} 1.0" in AFTER
    measured = view(MEASURED, BEFORE, AFTER.replace(f"{timed} 1.0", f"{timed} 0.0"))
    assert measured.syscall_seconds_by_family is None
    assert measured.syscall_calls_by_family is not None


def test_perf_mode_families_are_only_those_the_series_name() -> None:
    """Perf mode's syscalls collector counts a subset of the families, and syscall_families is not running."""
    text = AFTER.replace('schedwatch_source_up{source="syscall_families"} 1.0', "")
    measured = view(MEASURED, BEFORE, text)
    assert measured.syscall_calls_by_family == {family: float(MADE[family]) for family in FAMILIES if family in MADE}
    assert measured.syscall_seconds_by_family is None


def test_a_counter_that_went_backwards_is_unknown() -> None:
    line = f'cgroup="{MEASURED.cgroup}",family="clock"}} 3000.0'
    assert line in AFTER
    restarted = view(MEASURED, AFTER.replace(line, line.replace("3000.0", "3001.0")), AFTER)
    assert restarted.syscall_calls_by_family is None


def test_prometheus_increases_read_as_a_window_from_zero() -> None:
    """PrometheusSource hands a window whose first reading is empty and whose second holds the increases."""
    after = reading(AFTER, 1.0)
    window = Window(Reading(0.0, after.up, {}), Reading(1.0, after.up, after.workloads))
    measured = with_budget_inputs(window, workload_view(window, MEASURED, 2))
    assert measured.syscall_calls_by_family == {family: float(MADE.get(family, 0)) for family in FAMILIES}
    assert measured.syscall_seconds_by_family is not None
    assert measured.syscall_seconds_by_family["sleep"] == pytest.approx(0.420176546, abs=1e-12)


def sched_split(cgroup: str, values: dict[str, dict[str, float]]) -> str:
    """The two budget families of the sched program for one cgroup, as an agent prints them."""
    labels = f'container_id="",container="",pod="",namespace="",cgroup="{cgroup}"'
    lines = []
    for family, label in (("runqueue_wait_by_holder", "holder"), ("blocked", "state")):
        lines.append(f"# TYPE schedwatch_{family}_seconds counter")
        lines += [
            f'schedwatch_{family}_seconds_total{{{labels},{label}="{name}"}} {value}'
            for name, value in values[family].items()
        ]
    return "\n".join(lines) + "\n"


BEFORE_SPLIT = {
    "runqueue_wait_by_holder": {"self": 1.0, "other": 2.0, "kernel": 0.5},
    "blocked": {"interruptible": 10.0, "uninterruptible": 1.0},
}
AFTER_SPLIT = {
    "runqueue_wait_by_holder": {"self": 1.25, "other": 2.5, "kernel": 0.5},
    "blocked": {"interruptible": 10.75, "uninterruptible": 1.5},
}


def with_split(text: str, split: dict[str, dict[str, float]], mode: str = "bpf") -> str:
    return text.replace('schedwatch_mode{mode="bpf"}', f'schedwatch_mode{{mode="{mode}"}}') + sched_split(
        MEASURED.cgroup, split
    )


def test_waiting_by_holder_and_blocked_time_grow_over_the_window() -> None:
    measured = view(MEASURED, with_split(BEFORE, BEFORE_SPLIT), with_split(AFTER, AFTER_SPLIT))
    assert measured.waiting_by_holder == {"self": 0.25, "other": 0.5, "kernel": 0.0}
    # No futex count (the recording ran without the syscalls collector): interruptible sleep is all 'sleep'.
    assert measured.futex_wait_seconds is None
    assert measured.blocked_by_kind == {"io": 0.5, "sleep": 0.75}
    # A workload of the same reading without a series of its own had no wait and no sleep: 0, not unknown.
    empty = view(EMPTY, with_split(BEFORE, BEFORE_SPLIT), with_split(AFTER, AFTER_SPLIT))
    assert empty.waiting_by_holder == {"self": 0.0, "other": 0.0, "kernel": 0.0}
    assert empty.blocked_by_kind == {"io": 0.0, "sleep": 0.0}


def test_futex_waits_come_out_of_the_interruptible_sleep_and_never_below_zero() -> None:
    window = Window(reading(with_split(BEFORE, BEFORE_SPLIT), 10.0), reading(with_split(AFTER, AFTER_SPLIT), 11.0))
    base = workload_view(window, MEASURED, 2)
    shorter = with_budget_inputs(window, replace(base, futex_wait_seconds=0.5))
    assert shorter.blocked_by_kind == {"io": 0.5, "futex": 0.5, "sleep": 0.25}
    # A futex wait's seconds also hold the wait for a CPU after its wake-up: more than the sleep leaves 0.
    longer = with_budget_inputs(window, replace(base, futex_wait_seconds=0.9))
    assert longer.blocked_by_kind == {"io": 0.5, "futex": 0.9, "sleep": 0.0}


@pytest.mark.parametrize("mode", ["perf", "procfs"])
def test_waiting_by_holder_and_blocked_time_are_unknown_without_bpf(mode: str) -> None:
    measured = view(MEASURED, with_split(BEFORE, BEFORE_SPLIT, mode), with_split(AFTER, AFTER_SPLIT, mode))
    assert measured.waiting_by_holder is None
    assert measured.blocked_by_kind is None


def test_an_agent_older_than_the_budget_series_tells_neither() -> None:
    assert "schedwatch_runqueue_wait_by_holder" not in AFTER  # recorded before the sched program split them
    measured = view(MEASURED)
    assert measured.waiting_by_holder is None
    assert measured.blocked_by_kind is None


def neighbour_lines(held: dict[str, float]) -> str:
    labels = f'container_id="",container="",pod="",namespace="",cgroup="{MEASURED.cgroup}"'
    return "# TYPE schedwatch_runqueue_wait_by_neighbour_seconds counter\n" + "".join(
        f'schedwatch_runqueue_wait_by_neighbour_seconds_total{{{labels},neighbour="{name}"}} {value}\n'
        for name, value in held.items()
    )


def test_neighbours_grow_over_the_window_and_one_new_among_the_few_is_unknown_not_its_whole_history() -> None:
    """The wait for others grew 0.5 s; /batch held 0.3 s of it. /etl, exported only from the second reading on (it
    joined the top three with 9 s), is unknown for the window: left out, not counted as 9 s (nor as the whole
    0.5 s). /db went backwards (named again after it left the few: a new series) and is unknown too; the (other)
    row is no workload."""
    before = with_split(BEFORE, BEFORE_SPLIT) + neighbour_lines({"/batch": 1.2, "/db": 0.4, "(other)": 2.0})
    after = with_split(AFTER, AFTER_SPLIT) + neighbour_lines({"/batch": 1.5, "/etl": 9.0, "/db": 0.1, "(other)": 2.1})
    measured = view(MEASURED, before, after)
    assert measured.waiting_by_holder is not None and measured.waiting_by_holder["other"] == pytest.approx(0.5)
    assert measured.neighbours == (("/batch", pytest.approx(0.3)),)
    # Without the wait by holder (perf mode), neighbours are unknown too.
    assert (
        view(MEASURED, with_split(BEFORE, BEFORE_SPLIT, "perf"), with_split(AFTER, AFTER_SPLIT, "perf")).neighbours
        is None
    )


def test_the_neighbours_of_a_workload_new_in_the_window_count_from_zero() -> None:
    """A workload the earlier reading did not have started inside the window: its neighbours' series count whole."""
    before = with_split(BEFORE, BEFORE_SPLIT)
    after = with_split(AFTER, AFTER_SPLIT) + neighbour_lines({"/batch": 0.25})
    renamed = Workload(cgroup=MEASURED.cgroup + "-new")
    before_new = before.replace(f'cgroup="{MEASURED.cgroup}"', f'cgroup="{renamed.cgroup}-gone"')
    after_new = after.replace(f'cgroup="{MEASURED.cgroup}"', f'cgroup="{renamed.cgroup}"')
    assert view(renamed, before_new, after_new).neighbours == (("/batch", 0.25),)


def memory_lines(events: dict[str, float], minor: float, refaults: float, limit: float | None) -> str:
    labels = f'container_id="",container="",pod="",namespace="",cgroup="{MEASURED.cgroup}"'
    lines = ['schedwatch_source_up{source="cgroup_memory"} 1.0']
    lines += [f'schedwatch_memory_events_total{{{labels},event="{name}"}} {value}' for name, value in events.items()]
    lines += [
        f'schedwatch_page_faults_total{{{labels},kind="minor"}} {minor}',
        f'schedwatch_page_faults_total{{{labels},kind="major"}} 2.0',
        f"schedwatch_memory_refaults_total{{{labels}}} {refaults}",
    ]
    if limit is not None:
        lines.append(f"schedwatch_memory_limit_bytes{{{labels}}} {limit}")
    return "\n".join(lines) + "\n"


def test_memory_facts_grow_over_the_window_and_an_event_first_seen_counts_from_zero() -> None:
    before = BEFORE + memory_lines({"max": 10.0}, 1000.0, 50.0, 1 << 26)
    after = AFTER + memory_lines({"max": 1010.0, "oom_kill": 1.0}, 5000.0, 2050.0, 1 << 26)
    measured = view(MEASURED, before, after)
    assert measured.memory_events == {"high": 0.0, "max": 1000.0, "oom": 0.0, "oom_kill": 1.0}
    assert (measured.page_faults, measured.major_page_faults, measured.memory_refaults) == (4000.0, 0.0, 2000.0)
    assert measured.memory_limit_bytes == 1 << 26
    # Without the collector every memory fact is unknown; without a limit series, no limit.
    assert view(MEASURED).memory_events is None and view(MEASURED).page_faults is None
    no_limit = view(MEASURED, BEFORE + memory_lines({}, 1.0, 1.0, None), AFTER + memory_lines({}, 2.0, 1.0, None))
    assert no_limit.memory_limit_bytes is None and no_limit.memory_events == dict.fromkeys(
        ("high", "max", "oom", "oom_kill"), 0.0
    )
    # The collector runs but read nothing of this workload (no memory cgroup): its events are unknown, not zeros.
    unread = "".join(line + "\n" for line in memory_lines({}, 1.0, 1.0, None).splitlines() if "source_up" in line)
    not_read = view(MEASURED, BEFORE + unread, AFTER + unread)
    assert not_read.memory_events is None and not_read.page_faults is None


def test_processes_exited_are_zero_without_a_series_while_the_sched_collector_runs() -> None:
    assert view(MEASURED).processes_exited == 0.0
    text = AFTER.replace('schedwatch_source_up{source="sched"} 1.0', "")
    assert view(MEASURED, BEFORE, text).processes_exited is None


def periods(blocked: float, preempted: float, mode: str = "bpf", with_series: bool = True) -> str:
    """A scrape of an agent with the sched collector running, and the workload's off-CPU periods (or none)."""
    labels = 'container_id="",container="",pod="",namespace="",cgroup="/w"'
    lines = [
        'schedwatch_build_info{version="0.1.0",kernel_release="6.18"} 1',
        f'schedwatch_mode{{mode="{mode}"}} 1',
        'schedwatch_source_up{source="sched"} 1',
        f"schedwatch_threads{{{labels}}} 2",
    ]
    if with_series:
        lines += [
            f'schedwatch_offcpu_periods_total{{{labels},reason="blocked"}} {blocked}',
            f'schedwatch_offcpu_periods_total{{{labels},reason="preempted"}} {preempted}',
        ]
    return "\n".join([*lines, ""])


def test_off_cpu_periods_are_the_workloads_voluntary_and_involuntary_switches() -> None:
    ref = Workload(cgroup="/w")
    window = Window(reading(periods(1_000, 20), 10.0), reading(periods(19_737, 25), 11.0))
    view = workload_view(window, ref, 2)
    assert (view.voluntary_switches, view.involuntary_switches) == (18_737, 5)
    # An agent older than the series (no workload has one) and perf mode's (its sched collector reads schedstat)
    # cannot tell them: unknown, not 0.
    old = Window(reading(periods(0, 0, with_series=False), 10.0), reading(periods(0, 0, with_series=False), 11.0))
    assert workload_view(old, ref, 2).voluntary_switches is None
    perf = Window(reading(periods(0, 0, "perf", False), 10.0), reading(periods(0, 0, "perf", False), 11.0))
    assert workload_view(perf, ref, 2).involuntary_switches is None
    # A workload without a series while others have one had no switch ended in its cgroup: 0.
    other = Window(reading(periods(5, 5), 10.0), reading(periods(5, 5), 11.0))
    assert workload_view(other, Workload(cgroup="/idle"), 2).voluntary_switches == 0
