"""The syscalls collector in perf mode: sched_yield and futex calls by op per workload from counting perf events.

Same metric names and meaning as the BPF syscalls collector; futex wait time, its histogram and per-process
series need per-call timing, which counting events do not give: they are not exported in this mode. With
--perf-syscall-families (and the syscall_families collector on) it also counts the system-call families it can
count exactly (metrics.SYSCALLS for yield, futex and agent.counters.perf_syscalls.COUNTED_FAMILIES), the
BPF syscall_families collector's job in bpf mode.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.syscalls import FUTEX_OPS
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory
from agent.collectors.common.availability import tracefs_availability
from agent.counters import SourceUnavailable, perf_events
from agent.counters.cgroup_tree import perf_counts_hierarchically, perf_event_tree
from agent.counters.cgroup_watch import CgroupWatcher
from agent.counters.perf_syscalls import COUNTED_FAMILIES, FAMILY_SLOTS, REQUIRED_EVENTS, PerfSyscallCounters
from agent.identity.workload import REMOVED, workload_for_cgroup
from agent.log import get_logger
from agent.machine import syscall_families
from agent.machine.facts import MachineFacts
from agent.model import CounterTable, Labels

NAME = "syscalls"
FAMILIES_COLLECTOR = "syscall_families"  # agent.collectors.families.NAME: off, no family is counted in perf mode
log = get_logger("perf_syscalls")


def check(facts: MachineFacts) -> Availability:
    """Needs tracefs with the syscall tracepoints, a perf_event cgroup hierarchy, and perf_event_open allowed."""
    tracefs = tracefs_availability(facts)
    if facts.tracefs is None:
        return tracefs
    missing = [e for e in REQUIRED_EVENTS if perf_events.tracepoint_id(facts.tracefs, "syscalls", e) is None]
    if missing:
        return Availability(
            False, f"kernel lacks tracepoints syscalls:{', syscalls:'.join(missing)}", "use CONFIG_FTRACE_SYSCALLS=y"
        )
    if perf_event_tree(facts.cgroups) is None:
        return Availability(
            False,
            "no perf_event cgroup hierarchy (neither cgroup2 nor a v1 perf_event mount)",
            "mount -t cgroup -o perf_event perf_event /sys/fs/cgroup/perf_event",
        )
    if facts.perf_refused:
        return Availability(
            False,
            f"the kernel refused perf_event_open(): {facts.perf_refused}",
            "run as root or add PERFMON (SYS_ADMIN before Linux 5.8) to the capabilities, and allow perf_event_open "
            "in the seccomp profile (podman/docker: --cap-add=PERFMON --security-opt seccomp=unconfined)",
        )
    return Availability(True)


class PerfSyscallsCollector:
    """sched_yield and futex calls by op per workload, from per-cgroup counting perf events."""

    name = NAME

    def __init__(self, context: CollectorContext) -> None:
        facts = context.facts
        tree = perf_event_tree(facts.cgroups)
        assert tree is not None and facts.tracefs is not None  # check() said so
        self._identities = context.identities
        settings = context.settings
        self._families = settings.perf_syscall_families and FAMILIES_COLLECTOR in settings.collectors
        self._counters = PerfSyscallCounters(
            tree,
            facts.tracefs,
            perf_counts_hierarchically(facts.release),
            context.settings.max_cgroups,
            families=self._families,
        )
        self._table = CounterTable(
            self._counters.width, context.settings.series_grace_seconds, keep_forever=frozenset({REMOVED.labels()})
        )
        self._inexact: set[Labels] = set()  # workloads some of whose calls are counted in another's series
        self._watcher: CgroupWatcher | None = None
        try:
            self._watcher = CgroupWatcher(tree, self._counters.open_path, context.settings.max_cgroups)
        except OSError as error:
            log.warning(
                "cgroup_watch_unavailable",
                error=str(error),
                consequence="a new cgroup's calls before the next scrape are counted in its parent",
            )

    def collect(self) -> list[Metric]:
        """Read every counter once; new cgroups get theirs now."""
        snapshot = self._counters.read()
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {
            cgroup_id: (workload_for_cgroup(path, self._identities).labels(), vector)
            for cgroup_id, (path, vector) in snapshot.cgroups.items()
        }
        self._table.update(live)
        self._inexact.update(live[cgroup_id][0] for cgroup_id in snapshot.inexact if cgroup_id in live)
        yields = metrics.SCHED_YIELD_CALLS.family()
        futex = metrics.FUTEX_CALLS.family()
        by_family = metrics.SYSCALLS.family()
        exact = metrics.PERF_COUNTS_EXACT.family()
        shown: set[Labels] = set()
        for labels, row in self._table.rows():
            shown.add(labels)
            exact.add_metric(labels, 0 if labels in self._inexact else 1)
            yields.add_metric(labels, row[0])
            for index, op in enumerate(FUTEX_OPS):
                futex.add_metric([*labels, op], row[1 + index])
            if self._families:
                for family, calls in family_counts(row).items():
                    if calls:
                        by_family.add_metric([*labels, family], calls)
        health = snapshot.health
        opened = metrics.PERF_COUNTERS_OPEN.family()
        opened.add_metric([], health.counters_open)
        uncounted = metrics.PERF_CGROUPS_UNCOUNTED.family()
        uncounted.add_metric([], health.cgroups_uncounted)
        failures = metrics.PERF_COUNTER_OPEN_FAILURES.family()
        for reason, number in sorted(health.open_failures.items()):
            failures.add_metric([reason], number)
        self._inexact &= shown  # a workload whose series expired starts exact if its labels come back
        tracked = metrics.TRACKED_SERIES.family()
        tracked.add_metric([NAME], len(self._table))
        return [yields, futex, *([by_family] if self._families else []), exact, opened, uncounted, failures, tracked]

    def close(self) -> None:
        """Stop watching for new cgroups and close every counter."""
        if self._watcher is not None:
            self._watcher.close()
        self._counters.close()


def family_counts(row: tuple[int, ...]) -> dict[str, int]:
    """The families a counter vector with family slots holds: yields, futex calls (every op), COUNTED_FAMILIES."""
    counts = {syscall_families.YIELD: row[0], syscall_families.FUTEX: sum(row[1 : 1 + len(FUTEX_OPS)])}
    counts.update({family: row[FAMILY_SLOTS[family]] for family in COUNTED_FAMILIES})
    return counts


def _start(context: CollectorContext) -> Collector:
    try:
        return PerfSyscallsCollector(context)
    except OSError as error:  # PerfEventError included
        raise SourceUnavailable(f"perf counters cannot be opened: {error}") from error


FACTORY = CollectorFactory(
    name=NAME,
    description="sched_yield and futex calls by op (counting perf events per cgroup and CPU; no BPF), and with "
    "--perf-syscall-families the system-call families yield to process",
    check=check,
    start=_start,
)
