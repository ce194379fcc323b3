"""What a flag's text may be: the converters (text -> value, or a one-line ArgumentTypeError saying what to give) and
the bounds they check, with what the kernel-map sizes cost."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from agent.tables import kernel_memory, rows

# Outside 9100-9999, which Prometheus' list of exporter ports has used up.
DEFAULT_PORT = 17953
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
DEFAULT_WEB_MAX_CONNECTIONS = 64
DEFAULT_WEB_TIMEOUT = 10.0  # Prometheus' default scrape timeout: a scraper would have given up by then
WORKLOADS_BY = ("auto", "cgroup", "process")
MODES = ("auto", "bpf", "perf", "procfs")  # where counts come from (docs/modes.md)
SYSCALL_TIME = ("watched", "all")  # which workloads' system calls are timed (syscall_families collector)
MAX_TIMED_WORKLOADS = 1024
MAX_SAMPLE_FREQUENCY = 1000  # per CPU (agent/bpf/probes/oncpu.py)
MAX_CODE_TOP_K = 64
MAX_CODE_WORKLOADS = 1024

# Kernel memory each unit of a --max-* flag preallocates, from the bounded maps of the collectors' tables.
BYTES_PER_CGROUP = kernel_memory.bytes_per(rows.CGROUPS)
BYTES_PER_PROCESS = kernel_memory.bytes_per(rows.PROCESSES)
BYTES_PER_THREAD = kernel_memory.bytes_per(rows.THREADS)
BYTES_PER_TIMED_WORKLOAD = kernel_memory.bytes_per(rows.TIMED)
MAX_CGROUPS_LIMIT = 1 << 19  # of BYTES_PER_CGROUP each: about 584 MiB of kernel memory
MAX_PROCESSES_LIMIT = 1 << 20  # about 300 MiB
MAX_THREADS_LIMIT = 1 << 20  # about 340 MiB
MAX_WEB_CONNECTIONS_LIMIT = 1024  # each holds a thread and a file descriptor while it is open
BOOLEAN_WORDS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(("0", "false", "no", "off"), False)


def boolean(text: str) -> bool:
    """1/0, true/false, yes/no, on/off in any case; anything else is an error, not a silent false."""
    value = BOOLEAN_WORDS.get(text.strip().lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a boolean: use 1/0, true/false, yes/no or on/off")
    return value


def listen_address(text: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 as '[::1]:PORT') -> (host, port)."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise argparse.ArgumentTypeError(f"'{text}' is not HOST:PORT, e.g. {DEFAULT_LISTEN} or 0.0.0.0:{DEFAULT_PORT}")
    return host, int(port_text)


def _whole_number(text: str) -> int:
    if not (text.strip().isascii() and text.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number >= 0")
    return int(text)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


def count(minimum: int, maximum: int, bytes_per_entry: int = 0, entry: str = "") -> Callable[[str], int]:
    """A converter for a whole-number flag within [minimum, maximum]; a map size says what it costs when too big."""

    def convert(text: str) -> int:
        value = _whole_number(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"'{text}' must be at least {minimum}")
        if value > maximum and bytes_per_entry:
            raise argparse.ArgumentTypeError(
                f"{value} would preallocate about {_mib(value * bytes_per_entry)} of kernel memory "
                f"({bytes_per_entry} bytes per {entry}); give at most {maximum} ({_mib(maximum * bytes_per_entry)})"
            )
        if value > maximum:
            raise argparse.ArgumentTypeError(f"'{text}' is too many{entry and f' ({entry})'}: give at most {maximum}")
        return value

    return convert


def seconds(maximum: float, zero_allowed: bool = True, why: str = "") -> Callable[[str], float]:
    """A converter for a flag in seconds: a finite number >= 0 (or > 0), at most *maximum*."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_allowed):
            bound = ">= 0" if zero_allowed else "> 0"
            raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds {bound}")
        if value > maximum:
            raise argparse.ArgumentTypeError(
                f"'{text}' is more than {maximum:g} seconds{why}: give at most {maximum:g}"
            )
        return value

    return convert


def choice(options: Sequence[str]) -> Callable[[str], str]:
    """A converter accepting one of *options* (argparse checks choices of flags, not of defaults)."""

    def convert(text: str) -> str:
        if text not in options:
            raise argparse.ArgumentTypeError(f"'{text}' is not one of {', '.join(options)}")
        return text

    return convert


def optional_path(text: str) -> Path | None:
    """A file or directory flag; empty means none (so that an empty variable unsets it)."""
    return Path(text) if text.strip() else None


def items(text: str) -> tuple[str, ...]:
    """A comma-separated flag value: its non-empty items, stripped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())
