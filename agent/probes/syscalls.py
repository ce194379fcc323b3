"""sched_yield and futex accounting (bpf/syscalls.bpf.c): load, read the maps into plain snapshots."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent import bpf, kernel

SOURCE = "syscalls.bpf.c"
FUTEX_OPS = ("wait", "wake", "requeue", "lock_pi", "waitv", "other")  # enum futex_class order
WAIT_BUCKET_BOUNDS = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)  # seconds; + Inf, as in wait_bucket()
DROP_MAPS = ("cgroups", "processes", "futex_start")  # enum drop_reason order

REQUIRED_TRACEPOINTS = (
    ("syscalls", "sys_enter_sched_yield"),
    ("syscalls", "sys_enter_futex"),
    ("syscalls", "sys_exit_futex"),
    ("sched", "sched_process_exit"),
)
# futex2 syscalls, attached where the kernel has them: define -> tracepoints it needs.
OPTIONAL_TRACEPOINTS = {
    "HAVE_FUTEX_WAITV": (("syscalls", "sys_enter_futex_waitv"), ("syscalls", "sys_exit_futex_waitv")),
    "HAVE_FUTEX_WAIT": (("syscalls", "sys_enter_futex_wait"), ("syscalls", "sys_exit_futex_wait")),
    "HAVE_FUTEX_WAKE": (("syscalls", "sys_enter_futex_wake"),),
    "HAVE_FUTEX_REQUEUE": (("syscalls", "sys_enter_futex_requeue"),),
}


@dataclass(frozen=True)
class SyscallCounts:
    """Counters of one cgroup or process, straight from the kernel."""

    yields: int
    futex_calls: tuple[int, ...]  # by FUTEX_OPS
    futex_wait_ns: int


@dataclass(frozen=True)
class CgroupSyscalls:
    """A cgroup's counters plus its futex wait histogram (non-cumulative, by WAIT_BUCKET_BOUNDS + Inf)."""

    counts: SyscallCounts
    wait_buckets: tuple[int, ...]


@dataclass(frozen=True)
class ProcessSyscalls:
    """A live process's counters and the cgroup it last ran in."""

    cgroup_id: int
    counts: SyscallCounts


@dataclass(frozen=True)
class SyscallSnapshot:
    """Everything the probe's maps held at one moment."""

    cgroups: dict[int, CgroupSyscalls]
    processes: dict[int, ProcessSyscalls]
    drops: dict[str, int]
    map_entries: dict[str, int]
    map_capacity: dict[str, int]


@dataclass(frozen=True)
class SyscallProbeLimits:
    """Bounds of the probe's maps: every map is sized at load time and never grows."""

    max_cgroups: int = 4096
    max_processes: int = 16384  # 0 turns per-process accounting off in the kernel
    max_threads: int = 65536


def missing_tracepoints(tracefs: Path | None) -> list[str]:
    """Required tracepoints this kernel (or an unmounted tracefs) does not show."""
    return [f"{c}:{e}" for c, e in REQUIRED_TRACEPOINTS if not kernel.has_tracepoint(c, e, tracefs)]


def compile_defines(limits: SyscallProbeLimits, tracefs: Path | None) -> dict[str, str | int | None]:
    """-D options for bpf/syscalls.bpf.c: map sizes and the optional tracepoints present here."""
    defines: dict[str, str | int | None] = {
        "MAX_CGROUPS": limits.max_cgroups,
        "MAX_PROCESSES": limits.max_processes,
        "MAX_THREADS": limits.max_threads,
    }
    exit_fields = kernel.tracepoint_fields("sched", "sched_process_exit", tracefs) or frozenset()
    if "group_dead" in exit_fields:
        defines["HAVE_GROUP_DEAD"] = None
    for define, tracepoints in OPTIONAL_TRACEPOINTS.items():
        if all(kernel.has_tracepoint(c, e, tracefs) for c, e in tracepoints):
            defines[define] = None
    return defines


class SyscallProbe:
    """The loaded syscalls program. Reading it never blocks the kernel side."""

    name = "syscalls"

    def __init__(self, limits: SyscallProbeLimits, tracefs: Path | None) -> None:
        self.limits = limits
        self.defines = compile_defines(limits, tracefs)
        self._bpf: Any = bpf.compile_program(SOURCE, self.defines)

    @property
    def per_process(self) -> bool:
        """Whether the kernel keeps per-process counters."""
        return self.limits.max_processes > 0

    def read(self) -> SyscallSnapshot:
        """Read every map once, in bulk."""
        cgroups = {
            key.value: CgroupSyscalls(counts=_counts(value), wait_buckets=tuple(value.futex_wait_buckets))
            for key, value in self._bpf["cgroups"].items()
        }
        processes: dict[int, ProcessSyscalls] = {}
        if self.per_process:
            processes = {
                key.value: ProcessSyscalls(cgroup_id=value.cgroup_id, counts=_counts(value))
                for key, value in self._bpf["processes"].items()
            }
        drops_table = self._bpf["drops"]
        drops = {name: drops_table[drops_table.Key(index)].value for index, name in enumerate(DROP_MAPS)}
        entries = {"cgroups": len(cgroups), "futex_start": _count_keys(self._bpf["futex_start"])}
        capacity = {"cgroups": self.limits.max_cgroups, "futex_start": self.limits.max_threads}
        if self.per_process:
            entries["processes"] = len(processes)
            capacity["processes"] = self.limits.max_processes
        return SyscallSnapshot(cgroups, processes, drops, entries, capacity)

    def forget_cgroups(self, cgroup_ids: Iterable[int]) -> None:
        """Delete the entries of removed cgroups (after their last values were read)."""
        table = self._bpf["cgroups"]
        for cgroup_id in cgroup_ids:
            with contextlib.suppress(KeyError):
                del table[table.Key(cgroup_id)]

    def program_stats(self) -> list[bpf.ProgramStats]:
        """Kernel accounting of each attached program."""
        return bpf.program_stats(self._bpf)

    def close(self) -> None:
        """Detach every program and free the maps."""
        self._bpf.cleanup()


def _counts(value: Any) -> SyscallCounts:
    return SyscallCounts(
        yields=value.yields,
        futex_calls=tuple(value.futex_calls),
        futex_wait_ns=value.futex_wait_ns,
    )


def _count_keys(table: Any) -> int:
    return sum(1 for _ in table)
