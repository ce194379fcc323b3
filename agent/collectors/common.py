"""What the BPF collectors share: per-workload totals keyed by cgroup id, top-K processes, self-metrics."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from agent import metrics
from agent.bpf.probes.base import MapHealth, ProbeLimits
from agent.bpf.stats import ProgramStats
from agent.collectors import Availability, CollectorContext
from agent.config import Settings
from agent.exposition.family import BlockCache, RowFamily
from agent.identity.placement import KeySpace, Placement, ProcessKeys
from agent.identity.workload import REMOVED, UNRESOLVED, Identities, process_labels, workload_for_cgroup
from agent.machine import kernel
from agent.machine.facts import MachineFacts
from agent.machine.procfs import ProcFS
from agent.model import CounterTable, Labels

PROCESS_KEYS = 16384
_go_float: Callable[[float], str] = floatToGoString


def bucket_labels(bounds: Sequence[float]) -> tuple[str, ...]:
    """The `le` label values for histogram *bounds*, +Inf last."""
    return (*(_go_float(bound) for bound in bounds), "+Inf")


def cumulative(counts: Sequence[int]) -> tuple[int, ...]:
    """Per-bucket counts -> the cumulative counts Prometheus histograms carry."""
    return tuple(accumulate(counts))


def probe_limits(settings: Settings, keys: KeySpace) -> ProbeLimits:
    """Map sizes and key space for a probe and, in sidecar mode, the (device, inode) of the agent's pid namespace.

    Keyed by process, the per-workload map holds one entry per process: it gets at least PROCESS_KEYS entries.
    """
    namespace = None
    if settings.sidecar:
        info = os.stat("/proc/self/ns/pid")
        namespace = (info.st_dev, info.st_ino)
    workloads = workload_map_size(settings, keys.per_process)
    return ProbeLimits(
        workloads, settings.max_processes, settings.max_threads, namespace, keys.per_process, keys.place_hierarchy
    )


def workload_map_size(settings: Settings, per_process: bool) -> int:
    """Capacity of the per-workload maps: --max-cgroups, and at least PROCESS_KEYS when keyed by process."""
    return max(settings.max_cgroups, PROCESS_KEYS) if per_process else settings.max_cgroups


def bpf_availability(facts: MachineFacts, required: Sequence[tuple[str, str]]) -> Availability:
    """Whether a BPF collector needing the *required* tracepoints can run here; if not, why and the fix.

    Each reason names what is missing (a capability, tracefs, a tracepoint, headers) and each fix says what to add.
    """
    missing_caps = facts.missing_bpf_capabilities()
    if missing_caps:
        return Availability(False, _missing_capabilities_reason(missing_caps), _capabilities_fix(facts, missing_caps))
    if facts.tracefs is None:
        mount = (
            "mount -t tracefs tracefs /sys/kernel/tracing (schedwatch does this itself with CAP_SYS_ADMIN)"
            if facts.capabilities["CAP_SYS_ADMIN"]
            else "in a container, mount the host's /sys/kernel/tracing read-only (the DaemonSet does); on the host, "
            "mount -t tracefs tracefs /sys/kernel/tracing"
        )
        return Availability(False, "tracefs is not mounted", mount)
    missing = [f"{c}:{e}" for c, e in required if not kernel.has_tracepoint(c, e, facts.tracefs)]
    if missing:
        return Availability(
            False,
            f"kernel lacks tracepoints {', '.join(missing)}",
            "use a kernel built with CONFIG_FTRACE_SYSCALLS=y and CONFIG_TRACEPOINTS=y",
        )
    refused = _kernel_refusal(facts)
    if refused is not None:
        return refused
    if facts.headers is None:
        return Availability(False, "no kernel headers", facts.headers_error)
    return Availability(True)


_CAPABILITY_NEEDS = {
    "CAP_BPF": "CAP_BPF (create maps, load programs)",
    "CAP_PERFMON": "CAP_PERFMON (load tracepoint programs, attach them with perf_event_open)",
    "CAP_SYS_ADMIN": "CAP_SYS_ADMIN (kernels < 5.8 have no CAP_BPF or CAP_PERFMON)",
}


def _missing_capabilities_reason(missing: Sequence[str]) -> str:
    return "missing " + " and ".join(_CAPABILITY_NEEDS[name] for name in missing)


def _capabilities_fix(facts: MachineFacts, missing: Sequence[str]) -> str:
    names = [name.removeprefix("CAP_") for name in missing]
    flags = " ".join(f"--cap-add={name}" for name in names)
    fix = f"run as root, or add {', '.join(names)} to securityContext.capabilities.add (podman/docker: {flags})"
    if "CAP_SYS_ADMIN" in missing:
        fix += "; deploy/kubernetes/overlays/old-kernels does this"
    return fix


def _kernel_refusal(facts: MachineFacts) -> Availability | None:
    """The capabilities are there, yet the kernel refused the probe map or perf event: say who refuses."""
    refused = [f"bpf() {facts.bpf_refused}"] if facts.bpf_refused else []
    if facts.perf_refused:
        refused.append(f"perf_event_open() {facts.perf_refused}")
    if not refused:
        return None
    what = " and ".join(refused)
    if facts.bpf_refused and facts.needs_memlock():
        return Availability(
            False,
            f"the kernel refused {what}: kernels < 5.11 charge BPF maps to RLIMIT_MEMLOCK "
            f"({(facts.memlock_bytes or 0) // 1024} KiB here)",
            "add SYS_RESOURCE (deploy/kubernetes/overlays/old-kernels does), or raise the memlock limit (ulimit -l)",
        )
    if facts.seccomp_filtered:
        return Availability(
            False,
            f"the kernel refused {what} although the capabilities are there: a seccomp profile filters them",
            "run with seccompProfile: Unconfined (podman/docker: --security-opt seccomp=unconfined), or a profile "
            "that allows bpf() and perf_event_open(); the runtimes' default profiles do not",
        )
    return Availability(
        False,
        f"the kernel refused {what} although the capabilities are there",
        "look for an LSM (AppArmor, SELinux) or kernel lockdown denying bpf(), and for "
        "kernel.perf_event_paranoid; run with appArmorProfile: Unconfined",
    )


class CgroupTotals:
    """Per-workload totals fed by a kernel map keyed by workload key (cgroup id, or process).

    Places each key (agent.identity.placement), keeps the totals monotonic (agent.model), and frees the kernel entries
    of gone cgroups and exited processes once their final values are folded in. A process that moves to another
    cgroup (keyed by process) leaves what it counted so far where it was, and counts on from there in its new place.
    """

    def __init__(
        self,
        keys: KeySpace,
        identities: Identities,
        width: int,
        grace_seconds: float,
        forget: Callable[[list[int]], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = keys
        self._identities = identities
        self._forget = forget
        self._table = CounterTable(width, grace_seconds, keep_forever=frozenset({REMOVED.labels()}), clock=clock)
        self._moves: dict[Hashable, _Moved] = {}  # per process source: where it was and what it had counted there
        self._grace_seconds = grace_seconds
        self._clock = clock
        # Sources whose kernel entries were deleted as final, with their labels and when: a gone task's last
        # scheduler event (its final switch runs after it left its cgroup) can make the entry again.
        self._finalized: dict[Hashable, tuple[Labels, float]] = {}

    def update(
        self,
        vectors: dict[int, Sequence[int]],
        read_again: Callable[[list[int]], dict[int, Sequence[int]]] | None = None,
    ) -> None:
        """This scrape's counter vector of every key in the kernel map. *read_again* reads keys' vectors anew: a key
        found final (its cgroup or process gone) may have counted on between the map's read and that finding, and
        cannot count any more, so what it says now is its last value."""
        placements = self._keys.place(vectors)
        healthy = self._keys.healthy
        if read_again is not None:
            final_keys = [key for key, placement in placements.items() if placement.final]
            if final_keys:
                vectors = {**vectors, **read_again(final_keys)}
        by_source: dict[Hashable, tuple[Placement, Sequence[int]]] = {}
        final = []
        for key, vector in vectors.items():
            placement = placements[key]
            if placement.final:
                final.append(key)
            seen = by_source.get(placement.source)
            if seen is not None:  # a process's live and exited entries, both read mid-move
                vector = [max(a, b) for a, b in zip(seen[1], vector, strict=True)]
                placement = seen[0] if placement.path is None else placement
            by_source[placement.source] = (placement, vector)
        live: dict[Hashable, tuple[Labels, Sequence[int]]] = {}
        final_sources = {placements[key].source for key in final}
        finalized: dict[Hashable, Labels] = {}
        for source, (placement, vector) in by_source.items():
            table_source, counted = self._follow_moves(source, placement.path, vector)
            if placement.path is None and healthy:
                # Gone before it was placed, or made again after its entry was deleted: keep counting it where it
                # was counted while its series lasts.
                labels = self._table.labels_of(table_source) or self._finalized_labels(table_source) or REMOVED.labels()
            elif healthy:
                labels = workload_for_cgroup(placement.path, self._identities).labels()
            else:
                labels = UNRESOLVED.labels()
            live[table_source] = (labels, counted)
            if source in final_sources and labels not in (REMOVED.labels(), UNRESOLVED.labels()):
                finalized[source] = labels
        self._moves = {source: moved for source, moved in self._moves.items() if source in by_source}
        self._table.update(live)
        if final:
            self._remember_finalized(finalized)
            self._forget(final)
            self._keys.forget(final)

    def _finalized_labels(self, source: Hashable) -> Labels | None:
        """The labels of a source deleted as final within the grace period, if it was."""
        known = self._finalized.get(source)
        return None if known is None or self._clock() - known[1] > self._grace_seconds else known[0]

    def _remember_finalized(self, finalized: dict[Hashable, Labels]) -> None:
        """Note the labels of the sources deleted now; forget those noted longer ago than the grace period."""
        now = self._clock()
        self._finalized = {
            source: known for source, known in self._finalized.items() if now - known[1] <= self._grace_seconds
        }
        self._finalized.update((source, (labels, now)) for source, labels in finalized.items())

    def _follow_moves(
        self, source: Hashable, path: str | None, vector: Sequence[int]
    ) -> tuple[Hashable, Sequence[int]]:
        """The table source and values of *source* now: after a move, a new source counting from the move on."""
        moved = self._moves.get(source)
        if not self._keys.per_process or path is None:
            base = moved.base if moved else None
        elif moved is None:
            self._moves[source] = moved = _Moved(path, 0, None, list(vector))
            base = None
        else:
            if path != moved.path:  # the old table source is retired with what it counted until the last scrape
                moved.path, moved.generation, moved.base = path, moved.generation + 1, moved.last
            base = moved.base
            moved.last = list(vector)
        generation = moved.generation if moved else 0
        counted = vector if base is None else [now - then for now, then in zip(vector, base, strict=True)]
        return (source if generation == 0 else (source, generation)), counted

    def rows(self) -> Iterator[tuple[Labels, tuple[int, ...]]]:
        """(workload labels, totals) of every exported workload (the same tuple while they stand)."""
        return self._table.rows()

    def __len__(self) -> int:
        return len(self._table)


@dataclass
class _Moved:
    path: str
    generation: int
    base: list[int] | None  # the counts at the last move, subtracted from what the kernel says
    last: list[int]


class BpfCollector:
    """A collector over one BPF probe whose maps are keyed by cgroup id (and by process, opt-in).

    Each scrape reads the probe once, folds the per-cgroup vectors into monotonic per-workload totals, and asks the
    subclass for its families: ``cgroup_vector`` (what to keep per cgroup), ``workload_families`` and
    ``workload_series`` (the empty families, and one workload's rows of each from its totals) and
    ``process_families`` (for the processes chosen by ``chosen_processes``). A workload whose totals did not change
    since the last scrape gets the rows made then: no Python work per series for idle workloads.
    """

    name: str
    vector_width: int

    def __init__(self, context: CollectorContext, probe: Any) -> None:
        self._keys = context.keys
        self._identities = context.identities
        self._probe = probe
        if isinstance(context.keys, ProcessKeys):
            probe.announce_to(context.keys)
            context.keys.add_announcer(probe)
        self._totals = CgroupTotals(
            context.keys,
            context.identities,
            self.vector_width,
            context.settings.series_grace_seconds,
            probe.forget_cgroups,
        )
        self._top = TopProcesses(context.settings.process_top_k)
        self._proc = ProcFS()
        self._blocks = BlockCache(self.workload_series)

    def collect(self) -> list[Metric]:
        """Read the maps once and build every family of this collector."""
        self._keys.sync()
        snapshot = self._probe.read()
        vectors = {key: self.cgroup_vector(stats) for key, stats in snapshot.cgroups.items()}
        self._totals.update(vectors, self._read_again)
        return [
            *self._workload_families(),
            *self.process_families(snapshot.processes),
            *self_families(self.name, snapshot.health, self._probe.program_stats(), len(self._totals)),
        ]

    def _read_again(self, keys: list[int]) -> dict[int, Sequence[int]]:
        """The vectors of *keys* as the kernel map holds them now (those still there)."""
        return {key: self.cgroup_vector(stats) for key, stats in self._probe.read_cgroups(keys).items()}

    def _workload_families(self) -> list[RowFamily]:
        """The workload families, each workload's rows made again only when its totals changed."""
        families = self.workload_families()
        self._blocks.add_to(families, self._totals.rows())
        return families

    def close(self) -> None:
        """Detach the programs."""
        self._probe.close()

    def chosen_processes(self, processes: dict[int, Any], activity: dict[int, int]) -> Iterator[tuple[list[str], Any]]:
        """(labels, process) of the top-K processes by *activity*, labelled with their workload."""
        chosen = self._top.select(activity)
        places = self._keys.place({processes[pid].cgroup_id for pid in chosen})
        for pid in chosen:
            path = places[processes[pid].cgroup_id].path
            yield process_labels(pid, path, self._identities, self._proc), processes[pid]

    def cgroup_vector(self, stats: Any) -> Sequence[int]:
        """The counters to keep per cgroup, in a fixed order of vector_width entries."""
        raise NotImplementedError

    def workload_families(self) -> list[RowFamily]:
        """The empty per-workload families, in the order of ``workload_series``."""
        raise NotImplementedError

    def workload_series(self, labels: Labels, totals: Sequence[int]) -> Sequence[list[Any]]:
        """One workload's rows of each family of ``workload_families`` (``Family.rows`` / ``HistogramFamily.rows``
        entries), from its totals."""
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


def self_families(collector: str, health: MapHealth, programs: Iterable[ProgramStats], workloads: int) -> list[Metric]:
    """The collector's own cost and health: map fill, drops, program run counts, time and misses, workloads
    tracked."""
    entries = metrics.BPF_MAP_ENTRIES.family()
    capacity = metrics.BPF_MAP_MAX_ENTRIES.family()
    dropped = metrics.BPF_EVENTS_DROPPED.family()
    runs = metrics.BPF_PROGRAM_RUNS.family()
    run_seconds = metrics.BPF_PROGRAM_RUN_SECONDS.family()
    misses = metrics.BPF_PROGRAM_MISSES.family()
    tracked = metrics.TRACKED_SERIES.family()
    for name, count in health.entries.items():
        entries.add_metric([collector, name], count)
        capacity.add_metric([collector, name], health.capacity[name])
    for name, count in health.drops.items():
        dropped.add_metric([collector, name], count)
    for program in programs:
        runs.add_metric([collector, program.program], program.runs)
        run_seconds.add_metric([collector, program.program], program.run_seconds)
        if program.misses is not None:
            misses.add_metric([collector, program.program], program.misses)
    tracked.add_metric([collector], workloads)
    return [entries, capacity, dropped, runs, run_seconds, misses, tracked]
