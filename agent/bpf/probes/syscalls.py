"""sched_yield and futex accounting (bpf/syscalls.bpf.c): load, read the maps into snapshots (agent/tables/syscalls.py
says which field of struct cgroup_stats and struct process_stats feeds which metric)."""

from __future__ import annotations

from collections.abc import Callable
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
class SyscallSnapshot:
    """Everything the probe's maps held at one moment: each `cgroups` value as the collector decodes it, each live
    process's struct process_stats (its cgroup_id: the workload key it last counted under)."""

    cgroups: dict[int, Any]
    processes: dict[int, Any]
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

    def __init__(self, limits: ProbeLimits, tracefs: Path | None, decode_cgroup: Callable[[Any], Any]) -> None:
        """*decode_cgroup*: a `cgroups` value (struct cgroup_stats) to what the snapshot carries of it."""
        self.limits = limits
        super().__init__(compile_defines(limits, tracefs), decode_cgroup)

    def read(self) -> SyscallSnapshot:
        """Read every map once, in bulk."""
        cgroups = self.cgroup_entries()
        processes: dict[int, Any] = {}
        capacity = {"cgroups": self.limits.max_cgroups, "futex_start": self.limits.max_threads}
        if self.limits.max_processes > 0:
            processes = dict(self.table("processes").items())
            capacity["processes"] = self.limits.max_processes
        return SyscallSnapshot(cgroups, processes, self.health(capacity))
