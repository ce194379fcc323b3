"""rules/next_steps.py: a workload's CPU time by mode says what it shows and what to collect next, never a cause."""

from __future__ import annotations

import dataclasses

import pytest

from agent.diagnosis.facts import Facts, NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import read_environment
from agent.diagnosis.rules import diagnose, next_steps
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"


def facts_of(**fields: object) -> Facts:
    return Facts(node=NodeView(), workloads=(WorkloadView(ref=Workload(), **fields),))  # type: ignore[arg-type]


def test_most_cpu_in_the_kernel_says_which_command_to_run_next() -> None:
    diagnosis = diagnose(read_environment([FIXTURES / "public_time_v_borg2196.txt"]))
    assert diagnosis.findings == () and diagnosis.unchecked == ()
    (observation,) = diagnosis.observations
    assert observation.topic == "kernel-time-collect-next"
    assert observation.summary.startswith("99 % of the workload's CPU time is in the kernel (53.53 s system, 0.51 s")
    assert observation.look_next[0] == next_steps.WHICH_CALLS
    assert "`perf trace -s -p PID` or `strace -f -c -p PID` for 10 s" in observation.look_next[0]
    assert observation.evidence[0].value == pytest.approx(100 * 53.53 / 54.04, abs=1e-3)


def test_several_cpus_at_once_are_named_with_the_kernel_share() -> None:
    (observation,) = diagnose(read_environment([FIXTURES / "public_time_bash_hyperfine515.txt"])).observations
    assert "It ran on 3.9 CPUs at once" in observation.summary
    assert observation.evidence[1].value == pytest.approx((0.222 + 0.881) / 0.284, abs=1e-3)


@pytest.mark.parametrize("share", [0.0, 0.1, next_steps.KERNEL_SHARE - 1e-9])
def test_below_the_bar_nothing_is_said(share: float) -> None:
    assert next_steps.observations(facts_of(system_share=share, seconds=1.0, cpu_used_cores=1.0), ()) == ()


def test_known_system_call_times_leave_the_calls_to_the_signatures() -> None:
    facts = facts_of(system_share=0.9, syscall_seconds={"read": 3.0})
    assert next_steps.observations(facts, ()) == ()


def test_a_cpu_time_no_machine_has_is_the_accounting_not_a_load() -> None:
    (observation,) = diagnose(read_environment([FIXTURES / "public_time_zsh_illumos107.txt"])).observations
    assert observation.topic == "cpu-time-implausible"
    assert observation.evidence[0].value == pytest.approx((26.70 + 97.16) / 0.026, abs=1e-3)
    just_under = facts_of(seconds=1.0, user_seconds=1024.0, system_seconds=0.0, cpu_used_cores=1024.0)
    assert next_steps.observations(just_under, ()) == ()
    over = dataclasses.replace(just_under.workloads[0], cpu_used_cores=1025.0, user_seconds=1025.0)
    assert [o.topic for o in next_steps.observations(dataclasses.replace(just_under, workloads=(over,)), ())] == [
        "cpu-time-implausible"
    ]


def test_a_clock_source_without_vdso_is_an_observation_never_a_contention_cause() -> None:
    diagnosis = diagnose(read_environment([FIXTURES / "public_dmesg_clocksource_sozu500_hpet.txt"]))
    assert diagnosis.findings == () and diagnosis.unchecked == ()
    (observation,) = diagnosis.observations
    assert observation.topic == "clocksource-without-vdso"
    assert "clock source is hpet" in observation.summary and "not thread contention" in observation.summary
    assert observation.evidence[0].value == 3  # "Marking clocksource 'tsc' as unstable", "Marking TSC", "TSC found"
    assert observation.look_next[0].startswith("cat /sys/devices/system/clocksource/clocksource0/available_")


@pytest.mark.parametrize(
    ("name", "topic"), [("tsc", None), ("kvm-clock", None), ("acpi_pm", "clocksource-without-vdso")]
)
def test_only_clock_sources_without_a_vdso_are_named(name: str, topic: str | None) -> None:
    found = next_steps.observations(Facts(node=NodeView(clocksource=name), workloads=()), ())
    assert [o.topic for o in found] == ([topic] if topic else [])


def test_an_unstable_tsc_without_the_switch_says_to_read_the_current_source() -> None:
    (observation,) = diagnose(
        read_environment([FIXTURES / "public_dmesg_clocksource_arpl244_kernlog.txt"])
    ).observations
    assert observation.topic == "clocksource-tsc-unstable"
    assert observation.look_next[0] == "cat /sys/devices/system/clocksource/clocksource0/current_clocksource"
