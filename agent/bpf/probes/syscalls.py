"""sched_yield and futex accounting (bpf/syscalls.bpf.c): load, read the maps into snapshots (agent/tables/syscalls.py
says which field of struct cgroup_stats and struct process_stats feeds which metric), and the call sites."""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.bpf.probes.base import BpfProbe, MapHealth, ProbeLimits, common_defines
from agent.bpf.ring_listener import RingListener
from agent.log import get_logger
from agent.machine import kernel
from agent.machine.cpus import possible_cpu_slots

FUTEX_OPS = ("wait", "wake", "requeue", "lock_pi", "waitv", "other")  # enum futex_class order
WAIT_BUCKET_BOUNDS = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)  # seconds; + Inf, as in wait_bucket()
SITE_KINDS = ("sched_yield", "futex_wait")  # enum site_kind order
DEFAULT_CALL_SITES = 8192
CALL_SITE_MACHINES = ("x86_64",)  # count_site reads the x86-64 struct pt_regs
CALL_SITES_SINCE = (5, 15)  # bpf_task_pt_regs(), on a kernel with BTF (bpf_get_current_task_btf())
SITE_NEWS = struct.Struct("<IIQ")  # struct site_news_record: tgid, unused, boot_ns
logger = get_logger("syscalls")

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
class CallSite:
    """Calls of one kind made from one place of one process of one workload, counted since the entry was made."""

    workload: int
    tgid: int
    kind: str  # SITE_KINDS
    ip: int  # after the system call instruction
    caller: int  # the return address at the stack pointer (sched_yield), 0 (futex waits)
    count: int


@dataclass(frozen=True)
class SyscallSnapshot:
    """Everything the probe's maps held at one moment: each `cgroups` value as the collector decodes it, each live
    process's struct process_stats (its cgroup_id: the workload key it last counted under)."""

    cgroups: dict[int, Any]
    processes: dict[int, Any]
    health: MapHealth


def compile_defines(
    limits: ProbeLimits, tracefs: Path | None, call_sites: int = 0, site_workloads: int = 1
) -> dict[str, str | int | None]:
    """-D options for bpf/syscalls.bpf.c: map sizes, the optional tracepoints present here, and call sites
    (*call_sites* entries, counted for *site_workloads* chosen workloads; 0, or a machine that cannot read them: not
    counted)."""
    defines = common_defines(limits, tracefs)
    for define, tracepoints in OPTIONAL_TRACEPOINTS.items():
        if all(kernel.has_tracepoint(c, e, tracefs) for c, e in tracepoints):
            defines[define] = None
    if call_sites > 0 and call_sites_readable():
        defines["CALL_SITES"] = None
        defines["MAX_CALL_SITES"] = call_sites
        defines["MAX_SITE_WORKLOADS"] = max(1, site_workloads)
        defines["MAX_CPUS"] = possible_cpu_slots()
    return defines


def call_sites_readable() -> bool:
    """Whether this machine lets the program read a call's user registers: x86-64, Linux 5.15 or later, with BTF."""
    version = kernel.version_tuple(kernel.kernel_release())
    return os.uname().machine in CALL_SITE_MACHINES and version[:2] >= CALL_SITES_SINCE and kernel.has_btf()


class SyscallProbe(BpfProbe):
    """The loaded syscalls program. Reading it never blocks the kernel side."""

    source = "syscalls.bpf.c"
    drop_maps = ("cgroups", "processes", "futex_start", "new_processes", "call_sites")  # enum drop_reason order

    def __init__(
        self,
        limits: ProbeLimits,
        tracefs: Path | None,
        decode_cgroup: Callable[[Any], Any],
        call_sites: int = 0,
        site_workloads: int = 1,
    ) -> None:
        """*decode_cgroup*: a `cgroups` value (struct cgroup_stats) to what the snapshot carries of it."""
        self.limits = limits
        defines = compile_defines(limits, tracefs, call_sites, site_workloads)
        self.call_sites = int(defines.get("MAX_CALL_SITES") or 0)
        self.site_workloads = int(defines.get("MAX_SITE_WORKLOADS") or 0)
        super().__init__(defines, decode_cgroup)
        self._site_choice: frozenset[int] = frozenset()
        self._call_sites: dict[tuple[int, int, int, int, int], CallSite] = {}  # at the last read_call_sites
        self._site_keys: dict[bytes, tuple[int, int, int, int, int]] = {}  # each entry's key, decoded
        self._last_slots: list[tuple[bytes, bytes]] | None = None  # the CPUs' last-site slots at the last read
        self._site_generation = 0
        self._site_news: RingListener | None = None
        self.site_choice_refused = False
        if self.call_sites:
            # The first choice, none yet (every workload is new until the agent chooses), written now so that a
            # profile refusing map writes is found at load and said once.
            try:
                self.table("site_choice").set(0, self._site_generation)
            except OSError as error:  # every workload's sites stay counted, the gate never closes
                self.site_choice_refused = True
                logger.warning(
                    "call_sites_not_chosen",
                    error=f"writing a BPF map: {error}",
                    fix="allow bpf(2) command 2 (BPF_MAP_UPDATE_ELEM) and 3 (BPF_MAP_DELETE_ELEM) in the agent's "
                    "seccomp profile: until then every workload's call sites are counted, not only the "
                    "--code-workloads busiest (each yield and futex wait pays for its site); the counts are unaffected",
                )

    def read(self) -> SyscallSnapshot:
        """Read every map once, in bulk."""
        cgroups = self.cgroup_entries()
        processes: dict[int, Any] = {}
        capacity = {"cgroups": self.limits.max_cgroups, "futex_start": self.limits.max_threads}
        if self.limits.max_processes > 0:
            processes = dict(self.table("processes").items())
            capacity["processes"] = self.limits.max_processes
        if self.call_sites:
            capacity["call_sites"] = self.call_sites
        health = self.health(capacity)
        if not self.call_sites:
            health = MapHealth(
                health.entries, health.capacity, {k: v for k, v in health.drops.items() if k != "call_sites"}
            )
        return SyscallSnapshot(cgroups, processes, health)

    def choose_site_workloads(self, keys: Iterable[int]) -> None:
        """Count the call sites of these workloads from now on (at most site_workloads of them), and of those new
        until the next choice; the others' calls are counted without their sites. Nothing where map writes were
        refused at load."""
        if not self.call_sites or self.site_choice_refused:
            return
        wanted = frozenset(list(keys)[: self.site_workloads])
        table = self.table("site_workloads")
        table.delete(self._site_choice - wanted)
        for key in wanted - self._site_choice:
            table.set(key, 1)
        # The set first, then the generation that makes every workload read it again at its next call.
        self._site_generation = (self._site_generation + 1) & 0x7FFFFFFF
        self.table("site_choice").set(0, self._site_generation)
        self._site_choice = wanted

    def announce_site_processes(self, on_process: Callable[[int], object]) -> None:
        """Hand *on_process* each process the program counts a first call site of, from a thread of its own, as soon
        as it is announced (while the process most likely still lives). Nothing where sites are not counted."""
        if not self.call_sites:
            return

        def on_record(record: bytes) -> None:
            if len(record) == SITE_NEWS.size:
                on_process(SITE_NEWS.unpack(record)[0])

        self._site_news = RingListener("syscalls-site-news", self.table("site_news"), on_record)

    def close(self) -> None:
        """Stop the announcements' listener, then detach the programs."""
        if self._site_news is not None:
            self._site_news.close()
        super().close()

    def read_call_sites(self, moved_only: bool = False) -> list[CallSite] | None:
        """Every call site counted: its `call_sites` entry plus the calls a CPU holds for it in `last_sites` (read
        in that order, so a count may show at the next read, never twice); with *moved_only*, only those whose count
        changed since the last read. None: not counted here."""
        if not self.call_sites:
            return None
        slots = self.table("last_sites").raw_items()
        if moved_only and slots == self._last_slots:
            # No CPU's slot changed since the last read: no call was counted since (a call adds to its CPU's slot, and
            # moves the slot's calls to the map only when its site differs). A CPU alternating between two sites can
            # return to the very same slot within a tick: those calls show at the next tick that reads, or the scrape.
            return []
        table = self.table("call_sites")
        # An entry is decoded once: its key's bytes name the same site for as long as it lives.
        known, keys = self._site_keys, {}
        counts: dict[tuple[int, int, int, int, int], int] = {}
        for raw_key, raw_count in table.raw_items():
            site = known.get(raw_key)
            if site is None:
                site = _site(table.Key.from_buffer_copy(raw_key))
            keys[raw_key] = site
            counts[site] = int.from_bytes(raw_count, sys.byteorder)
        self._site_keys = keys
        cache = self.table("last_sites")
        self._last_slots = cache.raw_items()  # after the entries: the reverse of the order the program writes them in
        for _cpu, raw_slot in self._last_slots:
            slot = cache.Leaf.from_buffer_copy(raw_slot)
            if slot.pending:
                site = _site(slot.site)
                counts[site] = counts.get(site, 0) + int(slot.pending)
        # A site whose count did not move is its last CallSite again: at every 1 s tick most of them are.
        last, made, moved = self._call_sites, {}, []
        for site, count in counts.items():
            call = last.get(site)
            if call is None or call.count != count:
                workload, tgid, kind, ip, caller = site
                if kind >= len(SITE_KINDS):
                    continue
                call = CallSite(workload, tgid, SITE_KINDS[kind], ip, caller, count)
                moved.append(call)
            made[site] = call
        self._call_sites = made
        return moved if moved_only else list(made.values())

    def forget_call_sites(self, sites: Iterable[CallSite]) -> list[CallSite]:
        """Delete the entries of *sites* (their processes have exited and their last counts were read), but for those
        a CPU still holds calls of (their calls reach the map later); the sites deleted."""
        held = {_site(slot.site) for _cpu, slot in self.table("last_sites").items() if slot.pending}
        table = self.table("call_sites")
        forgotten, keys = [], []
        for site in sites:
            kind = SITE_KINDS.index(site.kind)
            if (site.workload, site.tgid, kind, site.ip, site.caller) in held:
                continue
            key = table.Key()
            key.workload, key.ip, key.caller, key.tgid, key.kind = site.workload, site.ip, site.caller, site.tgid, kind
            keys.append(key)
            forgotten.append(site)
        table.delete(keys)
        return forgotten


def _site(key: Any) -> tuple[int, int, int, int, int]:
    """(workload, tgid, kind, ip, caller) of a struct site_key."""
    return (int(key.workload), int(key.tgid), int(key.kind), int(key.ip), int(key.caller))
