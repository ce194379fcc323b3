"""The kernel's own accounting of the agent's BPF programs: run counts and times, and events they missed."""

from __future__ import annotations

import ctypes
import re
from collections.abc import Mapping
from dataclasses import dataclass

from agent.bpf import BpfUnavailable, syscall
from agent.machine.procfs import ProcFS

_BPF_ENABLE_STATS = 32
_BPF_STATS_RUN_TIME = 0


class _StatsAttr(ctypes.Structure):
    """The BPF_ENABLE_STATS part of union bpf_attr."""

    _fields_ = [("type", ctypes.c_uint32)]


@dataclass(frozen=True)
class ProgramStats:
    """Run count and run time of one loaded program (zero unless BPF stats are enabled), and the events it was not
    run for because a BPF program was already running on that CPU (None where the kernel does not count them)."""

    program: str
    runs: int
    run_seconds: float
    misses: int | None = None


def program_stats(programs: Mapping[str, int]) -> list[ProgramStats]:
    """Per-program run counts and times from /proc/self/fdinfo (kernel.bpf_stats_enabled), by function name -> fd."""
    stats = []
    for name, fd in programs.items():
        fields = _fdinfo(fd)
        stats.append(
            ProgramStats(
                program=_short_program_name(name),
                runs=fields.get("run_cnt", 0),
                run_seconds=fields.get("run_time_ns", 0) / 1e9,
                misses=fields.get("recursion_misses"),
            )
        )
    return stats


def _short_program_name(function_name: str) -> str:
    """'tracepoint__syscalls__sys_enter_futex' -> 'sys_enter_futex'."""
    return function_name.rsplit("__", 1)[-1]


def _fdinfo(fd: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    text = ProcFS().read_text("self", f"fdinfo/{fd}")
    if text is None:
        return fields
    for key, value in re.findall(r"^(\w+):\s+(\d+)$", text, flags=re.MULTILINE):
        fields[key] = int(value)
    return fields


def enable_bpf_stats() -> int:
    """Turn on the kernel's BPF run-time accounting for as long as the returned fd stays open.

    Uses BPF_ENABLE_STATS, so the setting goes away with the agent instead of staying
    switched on machine-wide as ``sysctl kernel.bpf_stats_enabled=1`` would.
    """
    attr = _StatsAttr(_BPF_STATS_RUN_TIME)
    try:
        return syscall.bpf(_BPF_ENABLE_STATS, attr)
    except OSError as error:
        if error.errno == 1:  # EPERM
            hint = " (it needs CAP_SYS_ADMIN; or set sysctl kernel.bpf_stats_enabled=1 on the host)"
        else:  # EINVAL before Linux 5.8
            hint = " (Linux 5.8 or newer has it; elsewhere set sysctl kernel.bpf_stats_enabled=1 on the host)"
        raise BpfUnavailable(f"BPF_ENABLE_STATS failed: {error.strerror or error}{hint}") from error
