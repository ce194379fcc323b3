"""The oncpu collector: each workload's on-CPU samples by library and function (bpf/oncpu.bpf.c, a cpu-clock timer on
every CPU), read every second (agent/collectors/common/ticker.py: a process's maps are read while it lives) and at
each scrape, named for the --code-workloads busiest workloads of each read, and exported as the --code-top-k busiest
rows per workload plus one (other) row."""

from __future__ import annotations

from prometheus_client.core import Metric

from agent import metrics
from agent.bpf.probes.base import MapHealth
from agent.bpf.probes.oncpu import OnCpuProbe, Sample
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.code_rows import OTHER_CODE, add_rows, busiest, gains_by_workload, renamed, safe_row
from agent.collectors.common.limits import probe_limits
from agent.collectors.common.ranked_rows import RankedTable, Row
from agent.collectors.common.self_metrics import self_families
from agent.collectors.common.ticker import Ticker
from agent.identity.workload import workload_for_cgroup
from agent.machine.facts import MachineFacts
from agent.model import Labels
from agent.symbols.symbolizer import Symbolizer

NAME = "oncpu"
OTHER_SAMPLES: Row = (*OTHER_CODE, "")  # the rest of a workload's samples, user and kernel


def check(facts: MachineFacts) -> Availability:
    """BPF rights and headers, and a cpu-clock sampling event the kernel lets the agent open."""
    available = bpf_availability(facts, ())
    if not available.ok:
        return available
    if facts.sampling_refused:
        return Availability(
            False,
            f"the kernel refused a cpu-clock sampling event: perf_event_open() {facts.sampling_refused}",
            "give the agent CAP_PERFMON (or CAP_SYS_ADMIN before Linux 5.8) and allow perf_event_open() in its "
            "seccomp profile; --no-collector.oncpu turns sampling off",
        )
    return Available


Available = Availability(True)


class OnCpuCollector:
    """Samples read (and emptied) once a scrape, named, and kept as monotonic top-k rows per workload."""

    name = NAME

    def __init__(
        self, context: CollectorContext, probe: OnCpuProbe | None = None, symbolizer: Symbolizer | None = None
    ) -> None:
        """*probe* and *symbolizer*: the loaded program and the namer, unless given (a capture replayed)."""
        settings = context.settings
        self._keys = context.keys
        self._identities = context.identities
        self._probe = probe or OnCpuProbe(probe_limits(settings, context.keys), settings.sample_frequency)
        self._symbolizer = symbolizer or Symbolizer(cache=context.symbol_cache, version_of=context.library_version)
        self._named_workloads = settings.code_workloads
        self._table = RankedTable(settings.code_top_k, settings.series_grace_seconds, OTHER_SAMPLES)
        self._labels_of: dict[int, Labels] = {}  # each key's labels when last placed
        self._health = MapHealth({}, {}, {})
        self._ticker = Ticker(NAME, self._tick)

    def _tick(self) -> None:
        snapshot = self._probe.read()
        self.add(snapshot.samples)
        self._health = snapshot.health

    def collect(self) -> list[Metric]:
        """Read the samples since the last scrape, name the busiest workloads' ones, and export every workload's."""
        self._keys.sync()
        with self._ticker.lock:
            self._tick()
            self._expire()
            samples = metrics.CPU_SAMPLES.family()
            add_rows(samples, self._table, OTHER_SAMPLES)
            tracked = len(self._table)
        frequency = metrics.CPU_SAMPLE_FREQUENCY.family()
        frequency.add_metric((), self._probe.frequency)
        return [
            samples,
            frequency,
            *self_families(self.name, self._health, self._probe.program_stats(), tracked),
        ]

    def add(self, samples: list[Sample]) -> None:
        """Fold one read's samples into the table (under the ticker's lock)."""
        places = self._keys.place({sample.workload for sample in samples})
        labels_of: dict[int, Labels] = {
            key: workload_for_cgroup(place.path, self._identities).labels() for key, place in places.items()
        }
        self._follow({key: labels_of[key] for key, place in places.items() if place.path is not None})
        labelled: list[tuple[Labels, Sample, int]] = []
        per_workload: dict[Labels, int] = {}
        for sample in samples:
            labels = labels_of[sample.workload]
            labelled.append((labels, sample, sample.count))
            per_workload[labels] = per_workload.get(labels, 0) + sample.count
        self._symbolizer.next_round()
        named = busiest(per_workload, self._named_workloads)
        self._table.add(gains_by_workload(labelled, named, self._row, OTHER_SAMPLES))

    def _follow(self, placed: dict[int, Labels]) -> None:
        """Move the rows of workloads whose labels changed to their new labels; remember each placed key's."""
        for old, new in renamed(self._labels_of, placed).items():
            self._table.rename(old, new)
        self._labels_of.update(placed)

    def _expire(self) -> None:
        """Follow renamed workloads and drop the rows of those gone and quiet for the grace period (at scrapes only:
        it places every key)."""
        places = self._keys.place(set(self._labels_of))
        placed: dict[int, Labels] = {
            key: workload_for_cgroup(place.path, self._identities).labels()
            for key, place in places.items()
            if place.path is not None
        }
        self._follow(placed)
        self._table.expire({placed[key] for key, place in places.items() if key in placed and not place.final})
        kept = {labels for labels, _rows in self._table.items()}
        self._labels_of = {key: labels for key, labels in self._labels_of.items() if labels in kept}

    def _row(self, sample: Sample) -> Row:
        if sample.kernel:
            code = self._symbolizer.kernel(sample.address)
        else:
            code = self._symbolizer.user(sample.tgid, sample.address)
        return (*safe_row((code.library, code.version, code.function)), "kernel" if sample.kernel else "user")

    def rows_of(self, labels: Labels) -> list[tuple[Row, int]]:
        """A workload's exported rows (for tests and the in-process diagnosis)."""
        ranked = self._table.get(labels)
        return [] if ranked is None else ranked.rows(OTHER_SAMPLES)

    def close(self) -> None:
        """Stop the ticker; close the perf events and the map."""
        self._ticker.close()
        self._probe.close()


FACTORY = CollectorFactory(
    NAME,
    "on-CPU samples per workload by library and function (bpf/oncpu.bpf.c on a cpu-clock timer)",
    check,
    OnCpuCollector,
)
