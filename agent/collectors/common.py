"""What the BPF collectors share: per-workload totals keyed by cgroup id, top-K processes, self-metrics."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from agent import bpf, kernel, metrics
from agent.cgroups import CgroupPathResolver
from agent.collectors import Availability, CollectorContext
from agent.config import Settings
from agent.facts import MachineFacts
from agent.model import CounterTable, Labels
from agent.probes.base import MapHealth, ProbeLimits
from agent.workloads import REMOVED, Identities, Workload, workload_for_cgroup

UNRESOLVED = Workload(cgroup="(unresolved)")
_go_float: Callable[[float], str] = floatToGoString


def bucket_labels(bounds: Sequence[float]) -> list[str]:
    """The `le` label values for histogram *bounds*, +Inf last."""
    return [_go_float(bound) for bound in bounds] + ["+Inf"]


def cumulative(labels: Sequence[str], counts: Sequence[int]) -> list[tuple[str, int]]:
    """Per-bucket counts -> the cumulative (le, count) pairs Prometheus histograms carry."""
    running, buckets = 0, []
    for label, count in zip(labels, counts, strict=True):
        running += count
        buckets.append((label, running))
    return buckets


def probe_limits(settings: Settings) -> ProbeLimits:
    """Map sizes for a probe and, in sidecar mode, the (device, inode) of the agent's own pid namespace."""
    namespace = None
    if settings.sidecar:
        info = os.stat("/proc/self/ns/pid")
        namespace = (info.st_dev, info.st_ino)
    return ProbeLimits(settings.max_cgroups, settings.max_processes, settings.max_threads, namespace)


def bpf_availability(facts: MachineFacts, required: Sequence[tuple[str, str]]) -> Availability:
    """Whether a BPF collector needing the *required* tracepoints can run here; if not, why and the fix."""
    if not facts.can_load_bpf:
        return Availability(
            False,
            "no right to load BPF programs",
            "run as root, or grant CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN on kernels < 5.8)",
        )
    if facts.tracefs is None:
        return Availability(
            False,
            "tracefs is not mounted",
            "mount -t tracefs tracefs /sys/kernel/tracing (schedwatch run does this itself as root)",
        )
    missing = [f"{c}:{e}" for c, e in required if not kernel.has_tracepoint(c, e, facts.tracefs)]
    if missing:
        return Availability(
            False,
            f"kernel lacks tracepoints {', '.join(missing)}",
            "use a kernel built with CONFIG_FTRACE_SYSCALLS=y and CONFIG_TRACEPOINTS=y",
        )
    if facts.headers is None:
        return Availability(False, "no kernel headers", facts.headers_error)
    return Availability(True)


class CgroupTotals:
    """Per-workload totals fed by a kernel map keyed by cgroup id.

    Resolves each id to its workload, keeps the totals monotonic (agent.model), and frees the kernel
    entries of removed cgroups once their final values are folded in.
    """

    def __init__(
        self,
        resolver: CgroupPathResolver,
        identities: Identities,
        width: int,
        grace_seconds: float,
        forget: Callable[[list[int]], None],
    ) -> None:
        self._resolver = resolver
        self._identities = identities
        self._forget = forget
        self._table = CounterTable(width, grace_seconds, keep_forever=frozenset({REMOVED.labels()}))

    def update(self, vectors: dict[int, Sequence[int]]) -> None:
        """This scrape's counter vector of every cgroup id in the kernel map."""
        paths = self._resolver.resolve(vectors)
        healthy = self._resolver.healthy
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        removed = []
        for cgroup_id, vector in vectors.items():
            path = paths[cgroup_id]
            known = self._table.labels_of(cgroup_id)
            if path is None and healthy:
                removed.append(cgroup_id)
                if known is not None:  # a removed cgroup keeps its series until the grace period ends
                    live[cgroup_id] = (known, vector)
                    continue
            workload = workload_for_cgroup(path, self._identities) if healthy else UNRESOLVED
            live[cgroup_id] = (workload.labels(), vector)
        self._table.update(live)
        if removed:
            self._forget(removed)
            self._resolver.forget(removed)

    def rows(self) -> Iterator[tuple[Labels, list[int]]]:
        """(workload labels, totals) of every exported workload."""
        return self._table.rows()

    def __len__(self) -> int:
        return len(self._table)


class BpfCollector:
    """A collector over one BPF probe whose maps are keyed by cgroup id (and by process, opt-in).

    Each scrape reads the probe once, folds the per-cgroup vectors into monotonic per-workload totals, and asks the
    subclass for its families: ``cgroup_vector`` (what to keep per cgroup), ``workload_families`` (from the
    totals) and ``process_families`` (for the processes chosen by ``chosen_processes``).
    """

    name: str
    vector_width: int

    def __init__(self, context: CollectorContext, probe: Any) -> None:
        self._resolver = context.resolver
        self._identities = context.identities
        self._probe = probe
        self._totals = CgroupTotals(
            context.resolver,
            context.identities,
            self.vector_width,
            context.settings.series_grace_seconds,
            probe.forget_cgroups,
        )
        self._top = TopProcesses(context.settings.process_top_k)

    def collect(self) -> list[Metric]:
        """Read the maps once and build every family of this collector."""
        snapshot = self._probe.read()
        self._totals.update({cgroup_id: self.cgroup_vector(s) for cgroup_id, s in snapshot.cgroups.items()})
        return [
            *self.workload_families(self._totals.rows()),
            *self.process_families(snapshot.processes),
            *self_families(self.name, snapshot.health, self._probe.program_stats(), len(self._totals)),
        ]

    def close(self) -> None:
        """Detach the programs."""
        self._probe.close()

    def chosen_processes(self, processes: dict[int, Any], activity: dict[int, int]) -> Iterator[tuple[list[str], Any]]:
        """(labels, process) of the top-K processes by *activity*, labelled with their workload."""
        chosen = self._top.select(activity)
        paths = self._resolver.resolve(processes[pid].cgroup_id for pid in chosen)
        for pid in chosen:
            yield process_labels(pid, paths[processes[pid].cgroup_id], self._identities), processes[pid]

    def cgroup_vector(self, stats: Any) -> Sequence[int]:
        """The counters to keep per cgroup, in a fixed order of vector_width entries."""
        raise NotImplementedError

    def workload_families(self, rows: Iterable[tuple[Labels, list[int]]]) -> list[Metric]:
        """Families from the per-workload totals."""
        raise NotImplementedError

    def process_families(self, processes: dict[int, Any]) -> list[Metric]:
        """Families of the per-process series (empty families when per-process accounting is off)."""
        raise NotImplementedError


class TopProcesses:
    """Chooses the K processes worth a series: the most active since the last scrape, then overall."""

    def __init__(self, k: int) -> None:
        self.k = k
        self._previous: dict[int, int] = {}

    def select(self, activity: dict[int, int]) -> list[int]:
        """Pids to export, given each live process's cumulative activity count."""
        recent = {pid: total - self._previous.get(pid, 0) for pid, total in activity.items()}
        self._previous = activity
        active = [pid for pid, total in activity.items() if total > 0]
        return sorted(active, key=lambda pid: (recent[pid], activity[pid]), reverse=True)[: self.k]


def process_labels(pid: int, cgroup_path: str | None, identities: Identities) -> list[str]:
    """Label values of a per-process series: pid, comm, then its workload's labels."""
    return [str(pid), _comm(pid), *workload_for_cgroup(cgroup_path, identities).labels()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()[:16]
    except OSError:
        return ""


def self_families(
    collector: str, health: MapHealth, programs: Iterable[bpf.ProgramStats], workloads: int
) -> list[Metric]:
    """The collector's own cost and health: map fill, drops, program run counts and time, workloads tracked."""
    entries = metrics.BPF_MAP_ENTRIES.family()
    capacity = metrics.BPF_MAP_MAX_ENTRIES.family()
    dropped = metrics.BPF_EVENTS_DROPPED.family()
    runs = metrics.BPF_PROGRAM_RUNS.family()
    run_seconds = metrics.BPF_PROGRAM_RUN_SECONDS.family()
    tracked = metrics.TRACKED_SERIES.family()
    for name, count in health.entries.items():
        entries.add_metric([collector, name], count)
        capacity.add_metric([collector, name], health.capacity[name])
    for name, count in health.drops.items():
        dropped.add_metric([collector, name], count)
    for program in programs:
        runs.add_metric([collector, program.program], program.runs)
        run_seconds.add_metric([collector, program.program], program.run_seconds)
    tracked.add_metric([collector], workloads)
    return [entries, capacity, dropped, runs, run_seconds, tracked]
