"""The syscall_families collector: every workload's system calls by family, and the time inside them for the timed
workloads (bpf/families.bpf.c; the families are agent/machine/syscall_families.py's). Off by default: its programs
run on every system call of the node (docs/benchmarks.md gives the price)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.families import REQUIRED_TRACEPOINTS, FamiliesProbe, raw_tracepoints_available
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.bpf_collector import BpfCollector
from agent.collectors.common.limits import probe_limits
from agent.collectors.common.self_metrics import self_families
from agent.identity.workload import workload_for_cgroup
from agent.log import get_logger
from agent.machine import syscall_families
from agent.machine.facts import MachineFacts
from agent.model import Labels
from agent.tables.families import TABLE

NAME = TABLE.collector
log = get_logger(NAME)
CALLS = TABLE.layout.slices["calls"]  # calls by family, in each workload's vector
# A workload is timed only while it makes at least this many calls per second (between two scrapes); once timed, it
# stays timed while it makes at least half as many and is among the busiest.
MIN_TIMED_RATE = 100.0
EXITED_KEY_FLAG = 1 << 63  # bpf/schedwatch.h: keyed by process, the totals of a process that exited


def check(facts: MachineFacts) -> Availability:
    """BPF rights, tracefs with raw_syscalls, raw tracepoint programs (Linux 4.17), this architecture's table."""
    if syscall_families.syscall_names(os.uname().machine) is None:
        return Availability(
            False,
            f"no system-call table for {os.uname().machine} (the family table knows x86_64 and aarch64)",
            "run on x86_64 or aarch64, or add this architecture's numbers to agent/machine/syscall_families.py",
        )
    if not raw_tracepoints_available(facts.release):
        return Availability(
            False,
            f"kernel {facts.release} cannot load raw tracepoint programs (Linux 4.17 and later can)",
            "use a newer kernel; the other collectors do not need them",
        )
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class TimedChooser:
    """Chooses the workloads to time: the *size* making the most calls per second since the last choice, among
    those making at least *min_rate* (half of it for one timed already, so that the set does not flap)."""

    def __init__(self, size: int, min_rate: float = MIN_TIMED_RATE, clock: Callable[[], float] = time.monotonic):
        self.size = size
        self.min_rate = min_rate
        self._clock = clock
        self._last: dict[int, int] = {}
        self._last_at: float | None = None
        self.chosen: list[int] = []

    def choose(self, calls: dict[int, int]) -> list[int]:
        """The keys to time, busiest first, given each workload key's calls so far (all families)."""
        now = self._clock()
        if self._last_at is not None and now > self._last_at and self.size > 0:
            elapsed = now - self._last_at
            timed = set(self.chosen)
            # A key not in the map at the last read made all of its calls since.
            rates = {key: (total - self._last.get(key, 0)) / elapsed for key, total in calls.items()}
            eligible = [
                key
                for key, rate in rates.items()
                if rate >= self.min_rate or (key in timed and rate >= self.min_rate / 2)
            ]
            self.chosen = sorted(eligible, key=lambda key: rates[key], reverse=True)[: self.size]
        self._last, self._last_at = dict(calls), now
        return self.chosen


class FamiliesCollector(BpfCollector):
    """Calls by family for every workload, seconds by family for the timed ones (agent/tables/families.py); which
    workloads are timed."""

    name = NAME
    table = TABLE

    def __init__(self, context: CollectorContext) -> None:
        settings = context.settings
        self._time_all = settings.syscall_time == "all"
        probe = FamiliesProbe(
            probe_limits(settings, context.keys),
            context.facts.tracefs,
            TABLE.layout.vector,
            max_timed=settings.syscall_timed_workloads,
            time_all=self._time_all,
        )
        super().__init__(context, probe)
        self._families_probe = probe
        self._chooser = TimedChooser(settings.syscall_timed_workloads)
        self._warned = False

    def collect(self) -> list[Metric]:
        """Read the maps once, build every family, then choose the workloads to time until the next scrape."""
        self._keys.sync()
        snapshot = self._families_probe.read()
        self._totals.update(snapshot.cgroups, self._read_again)
        timed = self._timed_labels()
        if not self._time_all:
            live = {key: sum(vector[CALLS]) for key, vector in snapshot.cgroups.items() if key < EXITED_KEY_FLAG}
            chosen = self._chooser.choose(live)
            try:
                self._families_probe.set_timed(chosen)
            except OSError as error:  # the counts go on; only the timed set stays as it was
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "syscall_timing_not_changed",
                        error=f"writing a BPF map: {error}",
                        fix="allow bpf(2) command 2 (BPF_MAP_UPDATE_ELEM) and 3 (BPF_MAP_DELETE_ELEM) in the "
                        "agent's seccomp profile; the counts are unaffected",
                    )
        return [
            *self._workload_families(),
            self._timed_family(timed),
            *self_families(self.name, snapshot.health, self._probe.program_stats(), len(self._totals)),
        ]

    def _timed_labels(self) -> set[Labels] | None:
        """The labels of the workloads timed since the last scrape (None: every workload is)."""
        if self._time_all:
            return None
        places = self._keys.place(self._families_probe.timed)
        return {workload_for_cgroup(place.path, self._identities).labels() for place in places.values()}

    def _timed_family(self, timed: set[Labels] | None) -> Metric:
        family = metrics.SYSCALL_TIMED.family()
        for labels, _totals in self._totals.rows():
            family.add_metric(labels, 1 if timed is None or labels in timed else 0)
        return family


FACTORY = CollectorFactory(
    NAME,
    "system calls by family per workload, and their time for the timed workloads (bpf/families.bpf.c)",
    check,
    FamiliesCollector,
)
