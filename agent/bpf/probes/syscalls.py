"""sched_yield and futex accounting (bpf/syscalls.bpf.c): load, read the maps into plain snapshots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.bpf.probes.base import BpfProbe, MapHealth, ProbeLimits, common_defines
from agent.machine import kernel

FUTEX_OPS = ("wait", "wake", "requeue", "lock_pi", "waitv", "other")  # enum futex_class order
WAIT_BUCKET_BOUNDS = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)  # seconds; + Inf, as in wait_bucket()

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
    health: MapHealth


def compile_defines(limits: ProbeLimits, tracefs: Path | None) -> dict[str, str | int | None]:
    """-D options for bpf/syscalls.bpf.c: map sizes and the optional tracepoints present here."""
    defines = common_defines(limits, tracefs)
    for define, tracepoints in OPTIONAL_TRACEPOINTS.items():
        if all(kernel.has_tracepoint(c, e, tracefs) for c, e in tracepoints):
            defines[define] = None
    return defines


class SyscallProbe(BpfProbe):
    """The loaded syscalls program. Reading it never blocks the kernel side."""

    source = "syscalls.bpf.c"
    drop_maps = ("cgroups", "processes", "futex_start", "new_processes")  # enum drop_reason order

    def __init__(self, limits: ProbeLimits, tracefs: Path | None) -> None:
        self.limits = limits
        super().__init__(compile_defines(limits, tracefs), _cgroup)

    def read(self) -> SyscallSnapshot:
        """Read every map once, in bulk."""
        cgroups = self.cgroup_entries()
        processes: dict[int, ProcessSyscalls] = {}
        capacity = {"cgroups": self.limits.max_cgroups, "futex_start": self.limits.max_threads}
        if self.limits.max_processes > 0:
            processes = {
                key: ProcessSyscalls(cgroup_id=value.cgroup_id, counts=_counts(value))
                for key, value in self.table("processes").items()
            }
            capacity["processes"] = self.limits.max_processes
        return SyscallSnapshot(cgroups, processes, self.health(capacity))


def _cgroup(value: Any) -> CgroupSyscalls:
    return CgroupSyscalls(counts=_counts(value), wait_buckets=tuple(value.futex_wait_buckets))


def _counts(value: Any) -> SyscallCounts:
    return SyscallCounts(
        yields=value.yields,
        futex_calls=tuple(value.futex_calls),
        futex_wait_ns=value.futex_wait_ns,
    )
