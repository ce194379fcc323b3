"""prev_state encodings read from sched_switch's print format (copied from the development VM's kernel 6.18)."""

from __future__ import annotations

from pathlib import Path

from agent import kernel

TRACEFS = Path(__file__).parent / "fixtures" / "tracefs-6.18"


def test_blocked_mask_is_every_state_letter_but_running() -> None:
    assert kernel.sched_switch_blocked_mask(TRACEFS) == 0xFF


def test_dead_mask_is_the_exit_states() -> None:
    assert kernel.sched_switch_dead_mask(TRACEFS) == 0x10 | 0x20  # "X" (EXIT_DEAD) and "Z" (EXIT_ZOMBIE)


def test_masks_are_none_without_a_format(tmp_path: Path) -> None:
    assert kernel.sched_switch_blocked_mask(tmp_path) is None
    assert kernel.sched_switch_dead_mask(tmp_path) is None
