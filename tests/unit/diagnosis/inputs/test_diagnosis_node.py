"""Node CPU states from real /proc/stat readings (tests/unit/fixtures/proc-diagnosis)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.diagnosis.inputs.live.cpu_states import node_states, percentages, sample_node
from agent.machine.node_stat import STATES, CpuTicks, parse_proc_stat, read_proc_stat
from agent.machine.procfs import ProcFS
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "proc-diagnosis"


def test_online_cpus_and_totals_of_a_real_reading() -> None:
    ticks = read_proc_stat(ProcFS(FIXTURES / "libgomp"))
    assert ticks.online == (0, 1)
    assert ticks.total == CpuTicks(51681, 0, 9535, 60420, 378, 0, 171, 193)
    assert ticks.cpus[1].user == 26096


def test_states_between_two_readings_while_openmp_spun_on_cpu_1() -> None:
    before = read_proc_stat(ProcFS(FIXTURES / "libgomp"))
    after = read_proc_stat(ProcFS(FIXTURES / "libgomp-later"))
    states = node_states(before, after, 1.24)
    cpu1 = states.cpus[1]
    # CPU 1 never idled: 85 ticks user, 39 system (other tests on the VM), nothing else.
    assert cpu1.idle == 0
    assert cpu1.user == pytest.approx(100 * 85 / 124)
    assert cpu1.system == pytest.approx(100 * 39 / 124)
    for cpu in (states.total, *states.cpus.values()):
        assert sum(getattr(cpu, state) for state in STATES) == pytest.approx(100)


def test_no_tick_passed_is_all_zero() -> None:
    ticks = CpuTicks(1, 2, 3, 4, 5, 6, 7, 8)
    assert set(vars(percentages(ticks, ticks)).values()) == {0.0}


def test_guest_columns_are_not_counted_twice() -> None:
    before = parse_proc_stat("cpu  100 0 0 100 0 0 0 0 50 0\ncpu0 100 0 0 100 0 0 0 0 50 0\n")
    after = parse_proc_stat("cpu  200 0 0 200 0 0 0 0 150 0\ncpu0 200 0 0 200 0 0 0 0 150 0\n")
    assert percentages(before.total, after.total).user == 50


def test_an_old_kernel_without_steal_reads_zero_steal() -> None:
    ticks = parse_proc_stat("cpu 1 2 3 4 5 6 7\n")
    assert ticks.total.steal == 0
    assert ticks.cpus == {}


def test_a_stat_without_cpu_line_is_an_error() -> None:
    with pytest.raises(ValueError, match="no 'cpu' line"):
        parse_proc_stat("intr 1 2 3\n")


def test_a_cpu_going_offline_between_readings_is_left_out() -> None:
    before = parse_proc_stat("cpu 2 0 0 2 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0\ncpu1 1 0 0 1 0 0 0 0\n")
    after = parse_proc_stat("cpu 4 0 0 2 0 0 0 0\ncpu0 3 0 0 1 0 0 0 0\n")
    assert sorted(node_states(before, after, 1.0).cpus) == [0]


def test_sample_node_reads_twice(tmp_path: Path) -> None:
    times = iter([0.0, 1.0])
    states = sample_node(ProcFS(FIXTURES / "plain"), 1.0, clock=lambda: next(times), sleep=lambda _: None)
    assert states.seconds == 1.0
    assert sorted(states.cpus) == [0, 1]
    with pytest.raises(OSError, match="cannot read"):
        read_proc_stat(ProcFS(tmp_path))


def test_boot_time_switches_and_runnable_tasks_come_from_the_same_reading() -> None:
    ticks = read_proc_stat(ProcFS(FIXTURES / "libgomp"))
    assert (ticks.boot_time, ticks.context_switches, ticks.procs_running) == (1796087094.0, 5732905, 15)
    bare = parse_proc_stat("cpu 1 2 3 4 5 6 7 8\n")
    assert (bare.boot_time, bare.context_switches, bare.procs_running) == (None, None, None)
