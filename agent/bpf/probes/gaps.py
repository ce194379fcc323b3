"""What the BPF programs cannot count on a kernel, found from its release when they load: `check` and the agent's
mode log say it with the mode, as they say what perf or procfs mode cannot tell."""

from __future__ import annotations

from agent.bpf.probes.sched import prev_state_is_exact
from agent.machine.kernel import version_tuple

# From this release the kernel counts the runs of a tracepoint program it skipped (recursion_misses in fdinfo).
TRACEPOINT_MISSES_FROM = (6, 7)


def kernel_gaps(release: str) -> tuple[str, ...]:
    """Series the BPF programs cannot fill on kernel *release*, each with why."""
    version = version_tuple(release)
    gaps = []
    if not prev_state_is_exact(version):
        gaps.append(
            'wake-ups the kernel did not deliver (schedwatch_sched_events_missed_total{event="wakeup"}): from '
            "Linux 5.18 to 6.15 sched_switch reports a thread with a signal pending as asleep, so a missed wake-up "
            "cannot be told apart; missed switches are counted"
        )
    if version and version[:2] < TRACEPOINT_MISSES_FROM:
        gaps.append(
            "runs of a program the kernel skipped (schedwatch_bpf_program_misses_total stays 0): Linux counts them "
            "for tracepoint programs from 6.7"
        )
    return tuple(gaps)
