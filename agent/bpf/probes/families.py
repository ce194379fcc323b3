"""System calls by family per workload (bpf/families.bpf.c): load, fill the family table, choose who is timed,
read the maps into snapshots (agent/tables/families.py says which field of struct workload_syscalls feeds which
metric)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.bpf import BpfUnavailable
from agent.bpf.probes.base import BpfProbe, MapHealth, ProbeLimits, common_defines
from agent.machine import kernel, syscall_families

SYSCALL_SLOTS = 1024  # bpf/families.bpf.c: family_of's size
FAMILY_COUNT = len(syscall_families.FAMILIES)
REQUIRED_TRACEPOINTS = (("raw_syscalls", "sys_enter"), ("raw_syscalls", "sys_exit"), ("sched", "sched_process_exit"))
# Raw tracepoint programs (BPF_PROG_TYPE_RAW_TRACEPOINT) came with Linux 4.17.
RAW_TRACEPOINT_SINCE = (4, 17)
_UNUSED_DROP_SLOT = "unused"  # enum drop_reason's slots this program does not use: no per-process map, no fifth


@dataclass(frozen=True)
class FamiliesSnapshot:
    """Everything the probe's maps held at one moment: each `cgroups` value as the collector decodes it."""

    cgroups: dict[int, Any]
    health: MapHealth


def compile_defines(
    limits: ProbeLimits, tracefs: Path | None, max_timed: int, time_all: bool
) -> dict[str, str | int | None]:
    """-D options for bpf/families.bpf.c: map sizes, and whether every workload is timed."""
    defines = common_defines(limits, tracefs)
    defines.pop("MAX_PROCESSES", None)
    if time_all:
        defines["TIME_ALL"] = None
    else:
        defines["MAX_TIMED"] = max(1, max_timed)
    return defines


def family_table(machine: str) -> list[int]:
    """family_of's values, slot by slot: 1 + the family index of each syscall number (OTHER for numbers the table
    does not name). Raises BpfUnavailable for an architecture without a table."""
    numbered = syscall_families.family_by_number(machine)
    if numbered is None:
        raise BpfUnavailable(f"no system-call table for {machine}: the family table knows x86_64 and aarch64")
    other = syscall_families.FAMILIES.index(syscall_families.OTHER)
    return [1 + numbered.get(number, other) for number in range(SYSCALL_SLOTS)]


def raw_tracepoints_available(release: str) -> bool:
    """Whether this kernel loads raw tracepoint programs."""
    version = kernel.version_tuple(release)
    return bool(version) and version[:2] >= RAW_TRACEPOINT_SINCE


class FamiliesProbe(BpfProbe):
    """The loaded families program. Counting begins once the family table is written, right after loading."""

    source = "families.bpf.c"
    drop_maps = ("cgroups", _UNUSED_DROP_SLOT, "calls_in_progress", "new_processes", _UNUSED_DROP_SLOT)  # enum order

    def __init__(
        self,
        limits: ProbeLimits,
        tracefs: Path | None,
        decode_cgroup: Callable[[Any], Any],
        max_timed: int = 8,
        time_all: bool = False,
    ) -> None:
        self.limits = limits
        self.max_timed = max_timed
        self.time_all = time_all
        super().__init__(compile_defines(limits, tracefs, max_timed, time_all), decode_cgroup)
        self._timed: frozenset[int] = frozenset()
        self._epoch = 0
        self._generation = 0
        try:
            table = self.table("family_of")
            for number, value in enumerate(family_table(os.uname().machine)):
                table.set(number, value)
        except (OSError, BpfUnavailable) as error:
            self.close()
            if isinstance(error, BpfUnavailable):
                raise
            raise BpfUnavailable(
                f"cannot write the system-call family table into the BPF map: {error}; allow bpf(2) command 2 "
                "(BPF_MAP_UPDATE_ELEM) in the agent's seccomp profile"
            ) from error

    @property
    def timed(self) -> frozenset[int]:
        """The workload keys timed now (every one when time_all)."""
        return self._timed

    def set_timed(self, keys: Iterable[int]) -> None:
        """Time the calls of these workloads from now on (at most max_timed of them; the others stop being timed).

        A call in progress when its workload stops being timed is still timed when it returns; one that began
        before its workload was timed is not.
        """
        if self.time_all:
            return
        wanted = frozenset(list(keys)[: self.max_timed])
        if wanted == self._timed:
            return
        timing = self.table("timing")
        timed_workloads = self.table("timed_workloads")
        if wanted and not self._timed:
            # Timing starts again: calls that began under an earlier epoch may have returned unseen.
            self._epoch = self._epoch % 0xFFFFFFFF + 1
        timed_workloads.delete(self._timed - wanted)
        for key in wanted - self._timed:
            timed_workloads.set(key, 1)
        # The set first, then the generation that makes every workload read it again.
        self._generation = (self._generation + 1) & 0xFFFFFFFF
        timing.set(0, timing.Leaf(self._epoch if wanted else 0, self._generation))
        self._timed = wanted

    def read(self) -> FamiliesSnapshot:
        """Read every map once, in bulk."""
        capacity = {"cgroups": self.limits.max_cgroups, "calls_in_progress": self.limits.max_threads}
        if not self.time_all:
            capacity["timed_workloads"] = self.max_timed
        health = self.health(capacity)
        drops = {name: count for name, count in health.drops.items() if name != _UNUSED_DROP_SLOT}
        return FamiliesSnapshot(self.cgroup_entries(), MapHealth(health.entries, health.capacity, drops))
