"""Off-CPU time, run-queue latency by holder and blocked time by sleep (bpf/sched.bpf.c): load, read the maps into
snapshots (agent/tables/sched.py says which field of struct cgroup_sched and struct process_sched feeds which
metric)."""

from __future__ import annotations

import sys
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.bpf.maps import BpfMap
from agent.bpf.probes.base import BpfProbe, MapHealth, ProbeLimits, common_defines
from agent.log import get_logger
from agent.machine import kernel

OFFCPU_REASONS = ("preempted", "blocked")  # enum offcpu_reason order
MISSED_EVENTS = ("switch_in", "wakeup")  # enum missed_event order
HOLDERS = ("self", "other", "kernel")  # enum holder order: who had the CPU a thread waited for
SLEEPS = ("interruptible", "uninterruptible")  # enum sleep order: what a blocked thread slept in
# Seconds; + Inf, as in runq_bucket(). Dense between 0.5 and 25 ms, where a CPU-bound thread that shares its CPU
# waits (a scheduler slice is a few ms) and where oversubscribed thread pools were measured here.
RUNQ_BUCKET_BOUNDS = (1e-5, 1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 1e-1)
REQUIRED_TRACEPOINTS = (
    ("sched", "sched_switch"),
    ("sched", "sched_wakeup"),
    ("sched", "sched_wakeup_new"),
    ("sched", "sched_process_exit"),
)
# Neighbour pair entries per --max-cgroups unit (bpf/sched.bpf.c NEIGHBOUR_PAIRS): an LRU map, so a full one makes
# room by evicting the pair that waited least recently; two per workload slot hold every pair of 90 workloads
# sharing CPUs at the default 4096.
NEIGHBOUR_PAIRS_PER_CGROUP = 2
U64_MASK = (1 << 64) - 1
CLAIMING_KEY = U64_MASK  # bpf/sched.bpf.c: a workload slot being taken over, its totals not yet zeroed
PairEntry = tuple[int, int, int]  # (waiting workload key, holding workload key, when the kernel made the entry)
FALLBACK_BLOCKED_MASK = 0xFF  # Linux >= 4.14 (TASK_REPORT); used only if the format cannot be parsed
FALLBACK_DEAD_MASK = 0x30  # EXIT_DEAD | EXIT_ZOMBIE as reported since Linux 4.14
FALLBACK_INTERRUPTIBLE_MASK = 0x1  # "S" since Linux 4.14
FALLBACK_UNINTERRUPTIBLE_MASK = 0x82  # "D" | "I" (TASK_IDLE) since Linux 4.14

logger = get_logger("sched")


@dataclass(frozen=True)
class SchedSnapshot:
    """Everything the probe's maps held at one moment: each `cgroups` value as the collector decodes it, each live
    process's struct process_sched (its cgroup_id: the workload key it last ran in); *neighbours*: nanoseconds of
    each (waiting workload key, holding workload key, entry made at)'s waits for a CPU held by another workload (the
    kernel may evict a pair and make it again from 0: a new *made at*)."""

    cgroups: dict[int, Any]
    processes: dict[int, Any]
    health: MapHealth
    neighbours: dict[PairEntry, int] = field(default_factory=dict)


def compile_defines(limits: ProbeLimits, tracefs: Path | None) -> dict[str, str | int | None]:
    """-D options for bpf/sched.bpf.c: map sizes, this kernel's prev_state encoding, and whether it counts moves."""
    defines = common_defines(limits, tracefs)
    defines["NEIGHBOUR_PAIRS"] = NEIGHBOUR_PAIRS_PER_CGROUP * limits.max_cgroups
    defines["STATE_MASK"] = hex(kernel.sched_switch_blocked_mask(tracefs) or FALLBACK_BLOCKED_MASK)
    defines["DEAD_MASK"] = hex(kernel.sched_switch_dead_mask(tracefs) or FALLBACK_DEAD_MASK)
    defines["INTERRUPTIBLE_MASK"] = hex(kernel.sched_switch_state_mask("S", tracefs) or FALLBACK_INTERRUPTIBLE_MASK)
    defines["UNINTERRUPTIBLE_MASK"] = hex(
        kernel.sched_switch_state_mask("DI", tracefs) or FALLBACK_UNINTERRUPTIBLE_MASK
    )
    if kernel.has_tracepoint("cgroup", "cgroup_attach_task", tracefs):
        defines["HAVE_CGROUP_ATTACH"] = None  # workload keys cached per thread until a task moves
    if prev_state_is_exact(kernel.version_tuple(kernel.kernel_release())):
        defines["COUNT_MISSED_WAKEUPS"] = None
    return defines


def prev_state_is_exact(version: tuple[int, ...]) -> bool:
    """Whether sched_switch's prev_state says runnable for every thread that stays runnable. From 5.18 (which stopped
    re-reading the state at the tracepoint) to 6.15 (fixed in 6.16, and in some stable updates this cannot tell),
    a thread that tried to sleep with a signal pending is reported asleep, stays runnable and runs again without
    a wake-up: counting missed wake-ups there would count those too."""
    return bool(version) and not (5, 18) <= version[:2] < (6, 16)


class SchedProbe(BpfProbe):
    """The loaded sched program."""

    source = "sched.bpf.c"
    drop_maps = ("cgroups", "processes", "threads", "new_processes", "neighbours")  # enum drop_reason order

    def __init__(self, limits: ProbeLimits, tracefs: Path | None, decode_cgroup: Callable[[Any], Any]) -> None:
        """*decode_cgroup*: a `cgroups` value (struct cgroup_sched) to what the snapshot carries of it."""
        self.limits = limits
        # Workloads the agent forgot whose slots the program has not handed to another yet: not read again.
        self._forgotten_in_slots: set[int] = set()
        defines = compile_defines(limits, tracefs)
        super().__init__(defines, decode_cgroup)
        if "COUNT_MISSED_WAKEUPS" in defines:
            # Every program is attached now: wake-ups missed from here on are the kernel's doing.
            try:
                self.table("wakeups_watched_since").set(0, time.monotonic_ns())
            except OSError as error:  # the map stays 0: nothing else depends on it
                logger.warning(
                    "missed_wakeups_not_counted",
                    error=f"writing a BPF map: {error}",
                    fix="allow bpf(2) command 2 (BPF_MAP_UPDATE_ELEM) in the agent's seccomp profile; "
                    "every other series is unaffected",
                )

    @property
    def _has_slots(self) -> bool:
        """Whether workloads' totals live in `workload_slots` as well as in `cgroups` (not when keyed by process)."""
        return not self.limits.key_by_process

    def cgroup_entries(self) -> dict[int, Any]:
        """Every workload's totals, decoded: its slot's and its `cgroups` entry's added (an unchanged sum is its
        last decoding again)."""
        if not self._has_slots:
            return super().cgroup_entries()
        totals, self._forgotten_in_slots = read_workload_parts(
            self.table("cgroups"), self.table("workload_slots"), self._forgotten_in_slots
        )
        return self._cgroups.read_raw(totals, self.table("cgroups").Leaf)

    def read_cgroups(self, keys: Iterable[int]) -> dict[int, Any]:
        """The totals of *keys* still there (in a slot or in `cgroups`), read now."""
        if not self._has_slots:
            return super().read_cgroups(keys)
        hashed, slots = self.table("cgroups"), self.table("workload_slots")
        totals: dict[int, bytes] = {}
        for key in keys:
            entry = hashed.get(key)
            slot = slots.get(key % self.limits.max_cgroups)
            parts = [bytes(entry)] if entry is not None else []
            if slot is not None and slot.key == key:
                parts.append(bytes(slot.totals))
            if parts:
                totals[key] = parts[0] if len(parts) == 1 else add_words(*parts)
        return self._cgroups.decode_raw(totals, hashed.Leaf)

    def read(self) -> SchedSnapshot:
        """Read every map once, in bulk."""
        cgroups = self.cgroup_entries()
        processes: dict[int, Any] = {}
        capacity = {
            "cgroups": self.limits.max_cgroups,
            "threads": self.limits.max_threads,
            "neighbours": NEIGHBOUR_PAIRS_PER_CGROUP * self.limits.max_cgroups,  # full is normal: an LRU map
        }
        if self.limits.max_processes > 0:
            processes = dict(self.table("processes").items())
            capacity["processes"] = self.limits.max_processes
        neighbours = {
            (key.waiter, key.holder, value.since): value.waited_ns for key, value in self.table("neighbours").items()
        }
        return SchedSnapshot(cgroups, processes, self.health(capacity), neighbours)

    def forget_cgroups(self, cgroup_ids: Iterable[int]) -> None:
        """Delete the entries of removed cgroups, and the neighbour pairs either side of which is one."""
        gone = set(cgroup_ids)
        super().forget_cgroups(gone)
        if gone and self._has_slots:
            # Their slots go to the next workloads that map to them (the program zeroes a slot as it takes it over).
            slots, forgotten = self.table("workload_slots"), self.table("forgotten_keys")
            for key in gone:
                slot = slots.get(key % self.limits.max_cgroups)
                if slot is not None and slot.key == key:
                    self._forgotten_in_slots.add(key)
                    try:
                        forgotten.set(key, 1)
                    except OSError as error:  # the slot stays held: that workload's successors use the hash map
                        logger.warning("workload_slot_kept", error=f"writing a BPF map: {error}")
        if gone:
            table = self.table("neighbours")
            pairs = [key for key, _value in table.items() if key.waiter in gone or key.holder in gone]
            table.delete(pairs)


def read_workload_parts(hashed: BpfMap, slots: BpfMap, forgotten: set[int]) -> tuple[dict[int, bytes], set[int]]:
    """Every workload's totals (raw struct cgroup_sched) read now from the `cgroups` and `workload_slots` maps, as
    :func:`merge_workload_parts` adds them."""
    entries = {int.from_bytes(key, sys.byteorder): value for key, value in hashed.raw_items()}
    return merge_workload_parts(entries, (raw for _index, raw in slots.raw_items()), forgotten)


def merge_workload_parts(
    hashed: dict[int, bytes], slots: Iterable[bytes], forgotten: set[int]
) -> tuple[dict[int, bytes], set[int]]:
    """Each workload's totals: its `cgroups` entry (*hashed*) and its slot (raw struct workload_slot), added.

    A slot still held by a key in *forgotten* (a workload the agent forgot, its slot not taken over yet) is left
    out, so that its series expire like any removed workload's. Also returns the forgotten keys that still hold a
    slot: a key whose slot another workload took is never seen again (cgroup ids are not reused)."""
    totals = dict(hashed)
    still_held: set[int] = set()
    for raw in slots:
        key, body = slot_totals(raw)
        if key in forgotten:
            still_held.add(key)
        elif key:
            totals[key] = add_words(totals[key], body) if key in totals else body
    return totals, still_held


def slot_totals(raw: bytes) -> tuple[int, bytes]:
    """(key, the bytes of its struct cgroup_sched) of a raw struct workload_slot; key 0 for a free slot or one being
    taken over."""
    key = int.from_bytes(raw[:8], sys.byteorder)
    return (0 if key == CLAIMING_KEY else key), raw[8:]


def add_words(*parts: bytes) -> bytes:
    """The field-wise sum of raw structs made only of u64 counters (struct cgroup_sched), as bytes."""
    sums = array("Q", parts[0])
    for part in parts[1:]:
        for index, word in enumerate(array("Q", part)):
            sums[index] = (sums[index] + word) & U64_MASK
    return sums.tobytes()
