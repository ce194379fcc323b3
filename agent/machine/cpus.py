"""The kernel's CPU list format ("0-3,8,10-11"), as cpuset files, /proc/PID/status' Cpus_allowed_list and
/sys/devices/system/cpu/online write it, and the CPUs online."""

from __future__ import annotations

import os
from pathlib import Path

ONLINE = Path("/sys/devices/system/cpu/online")
POSSIBLE = Path("/sys/devices/system/cpu/possible")
# CPU numbers from here on are refused: far more than any kernel's NR_CPUS, and a range up to one such number
# (a corrupt file) would otherwise be expanded in memory.
CPU_NUMBER_LIMIT = 1 << 16


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The CPUs of a kernel CPU list such as '0-3,8,10-11' (none for empty text); ValueError when malformed."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, dash, last = part.partition("-")
        low = _cpu_number(first)
        high = _cpu_number(last) if dash else low
        if high < low:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.extend(range(low, high + 1))
    return tuple(cpus)


def _cpu_number(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) >= CPU_NUMBER_LIMIT:
        raise ValueError(f"bad CPU number {text!r}")
    return int(text)


def online_cpus() -> tuple[int, ...]:
    """The CPUs online now; OSError when the sysfs file cannot be read, ValueError when it is malformed or empty."""
    cpus = parse_cpu_list(ONLINE.read_text())
    if not cpus:
        raise ValueError(f"{ONLINE} lists no CPU")
    return cpus


def online_cpu_count() -> int:
    """How many CPUs are online (not just those this process may use); os.cpu_count() when sysfs cannot tell."""
    try:
        return len(online_cpus())
    except (OSError, ValueError):
        return os.cpu_count() or 1


def possible_cpu_slots() -> int:
    """One more than the highest CPU number the kernel may ever bring online (what bpf_get_smp_processor_id() can
    return); os.cpu_count() when sysfs cannot tell."""
    try:
        return max(parse_cpu_list(POSSIBLE.read_text()), default=(os.cpu_count() or 1) - 1) + 1
    except (OSError, ValueError):
        return os.cpu_count() or 1
