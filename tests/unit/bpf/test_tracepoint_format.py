"""prev_state encodings read from sched_switch's print format (copied from the development VM's kernel 6.18), and the
kernels whose prev_state can be trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.bpf.probes.sched import prev_state_is_exact
from agent.machine import kernel
from tests.unit.locations import UNIT_FIXTURES

TRACEFS = UNIT_FIXTURES / "tracefs-6.18"


def test_blocked_mask_is_every_state_letter_but_running() -> None:
    assert kernel.sched_switch_blocked_mask(TRACEFS) == 0xFF


def test_dead_mask_is_the_exit_states() -> None:
    assert kernel.sched_switch_dead_mask(TRACEFS) == 0x10 | 0x20  # "X" (EXIT_DEAD) and "Z" (EXIT_ZOMBIE)


def test_sleep_masks_are_the_letters_asked_for() -> None:
    assert kernel.sched_switch_state_mask("S", TRACEFS) == 0x01  # TASK_INTERRUPTIBLE
    assert kernel.sched_switch_state_mask("DI", TRACEFS) == 0x02 | 0x80  # TASK_UNINTERRUPTIBLE, TASK_REPORT_IDLE
    assert kernel.sched_switch_state_mask("Q", TRACEFS) is None  # no such letter in the table


def test_masks_are_none_without_a_format(tmp_path: Path) -> None:
    assert kernel.sched_switch_blocked_mask(tmp_path) is None
    assert kernel.sched_switch_dead_mask(tmp_path) is None
    assert kernel.sched_switch_state_mask("S", tmp_path) is None


@pytest.mark.parametrize(
    ("release", "exact"),
    [
        ("5.15.0-91-generic", True),  # before 5.18 the tracepoint read the state again, after a signal reset it
        ("5.18.0", False),
        ("6.1.0-28-cloud-amd64", False),
        ("6.15.9", False),
        ("6.16.0", True),  # try_to_block_task() writes the runnable state back for the tracepoint
        ("6.18.44-fc-v669", True),
        ("not-a-version", False),
    ],
)
def test_missed_wake_ups_are_counted_only_where_prev_state_says_runnable_for_every_runnable_thread(
    release: str, exact: bool
) -> None:
    assert prev_state_is_exact(kernel.version_tuple(release)) is exact
