"""Prometheus exposition: one custom collector over every running schedwatch collector (served by agent.web)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from agent import __version__, metrics
from agent.collectors import Collector
from agent.diagnosis.standing import StandingFindings
from agent.exposition.family import Family, RowFamily
from agent.exposition.process import ProcessMetrics
from agent.identity.labels import SampleGuard
from agent.identity.resolver import IdentityResolver
from agent.log import get_logger
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.model import Labels

log = get_logger("exporter")


class AgentCollector:
    """Serves each scrape by asking every running collector once; a failing one never breaks the scrape."""

    def __init__(
        self,
        running: dict[str, Collector],
        unavailable: dict[str, str],
        kernel_release: str,
        bpf_stats_on: Callable[[], bool],
        identities: IdentityResolver,
        findings: StandingFindings | None = None,
        mode: str = "bpf",
        cgroup_paths: CgroupPathResolver | None = None,
        degraded: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        """*unavailable*: why each collector that is not running cannot; *degraded*: (the form it runs in, why) of
        each collector --mode auto wanted from BPF and runs without it."""
        self._identities = identities
        self._degraded = degraded or {}
        self._cgroup_paths = cgroup_paths
        self._findings = findings
        self._mode = mode
        self._running = running
        self._unavailable = unavailable
        self._kernel_release = kernel_release
        self._bpf_stats_on = bpf_stats_on
        self._lock = threading.Lock()
        self._guard = SampleGuard()
        self._dropped: dict[str, int] = {}
        self.collections = 0  # scrapes and unserved collections done so far

    def collect(self) -> Iterator[Metric]:
        """Called by prometheus_client for each scrape (scrapes are serialised)."""
        with self._lock:
            families = self._collect()
        yield from families
        if self._findings is not None:  # the text is written: the rules run later, between scrapes
            self._findings.hand_over(families)

    def collect_unserved(self) -> None:
        """Do a scrape's work without serving it: folds exited processes out of the kernel maps between scrapes."""
        with self._lock:
            families = self._collect()
        if self._findings is not None:
            self._findings.hand_over(families)

    def _keep_valid(self, family: Metric) -> int:
        """Drop the series of *family* whose label values cannot be written; how many were dropped."""
        if isinstance(family, RowFamily) and not family.replaced:
            rows = family.label_rows()
            keep = self._guard.keep_valid_rows(rows)
            if keep is None:
                return 0
            family.keep_rows(keep)
            return len(rows) - sum(keep)
        family.samples, dropped = self._guard.keep_valid(family.samples)
        return dropped

    def _collect(self) -> list[Metric]:
        self.collections += 1
        if self._cgroup_paths is not None:
            self._cgroup_paths.begin_round()  # the collectors of this scrape share one walk of the cgroup tree
        self._identities.begin_round()  # ... and one view of the containers' names
        build = metrics.BUILD_INFO.family()
        build.add_metric([__version__, self._kernel_release], 1)
        stats = metrics.BPF_STATS_ENABLED.family()
        stats.add_metric([], 1 if self._bpf_stats_on() else 0)
        mode = metrics.MODE.family()
        mode.add_metric([self._mode], 1)
        up = metrics.SOURCE_UP.family()
        degraded = metrics.SOURCE_DEGRADED.family()
        for name, (runs_as, cause) in sorted(self._degraded.items()):
            degraded.add_metric([name, runs_as, cause], 1)
        duration = metrics.COLLECT_DURATION.family()
        merged: dict[str, Metric] = {}
        for name in self._unavailable:
            up.add_metric([name], 0)
        for name, collector in self._running.items():
            started = time.perf_counter()
            try:
                families = collector.collect()
            except Exception:
                log.exception("collector_failed", collector=name)
                up.add_metric([name], 0)
                continue
            for family in families:
                dropped = self._keep_valid(family)
                if dropped:
                    self._dropped[name] = self._dropped.get(name, 0) + dropped
                    log.error("samples_dropped", collector=name, metric=family.name, samples=dropped)
                _merge(merged, family)
            up.add_metric([name], 1)
            duration.add_metric([name], time.perf_counter() - started)
        dropped_samples = metrics.SAMPLES_DROPPED.family()
        for name in self._running:
            dropped_samples.add_metric([name], self._dropped.get(name, 0))
        lookups = metrics.RUNTIME_LOOKUPS.family()
        for (runtime, result), count in sorted(self._identities.lookup_counts().items()):
            lookups.add_metric([runtime, result], count)
        self._identities.forget_unwanted()
        families = [
            build,
            mode,
            stats,
            up,
            *([degraded] if self._degraded else []),
            duration,
            dropped_samples,
            lookups,
            *merged.values(),
        ]
        if self._findings is not None:
            live = _workloads_in(merged.get(metrics.THREADS.name))
            families.append(self._findings.family(live))
            families.append(self._findings.pool_workers_family(live))
            families.append(self._findings.node_cpus_family())
        return families


def _workloads_in(threads: Metric | None) -> set[Labels] | None:
    """The workloads alive in this scrape: those with a threads gauge (every mode's cgroup_cpu collector exports one
    for each cgroup there is); None without that family."""
    if threads is None:
        return None
    if isinstance(threads, RowFamily):
        return {tuple(labels) for labels in threads.label_rows()}
    return {tuple(sample.labels[name] for name in metrics.WORKLOAD_LABELS) for sample in threads.samples}


def _merge(merged: dict[str, Metric], family: Metric) -> None:
    """Families of the same name from several collectors (self-metrics) become one."""
    existing = merged.get(family.name)
    if existing is None:
        merged[family.name] = family
    elif isinstance(existing, Family) and isinstance(family, Family) and not existing.replaced:
        existing.add_blocks(family.blocks)
    else:
        existing.samples.extend(family.samples)


def build_registry(collector: AgentCollector) -> CollectorRegistry:
    """A registry with schedwatch's series and the agent's own process metrics (CPU, memory)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    registry.register(ProcessMetrics())
    return registry
