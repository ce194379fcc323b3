"""A Prometheus server that scrapes schedwatch agents: the workloads of every node ranked by contention over a
window, and one node's workloads as facts.

``--from prometheus+http://HOST:9090`` (or ``prometheus+https://``) names the server; the rest of the URL is its
address as the browser would use it (a path prefix included). Counts over the window are exact differences of
the samples (see :func:`exact_growth`), grouped by ``instance`` and the workload labels, gauges from their last
value; nodes are the ``instance`` label. A workload younger than the window (or gone before its end) is counted over
the part of the window its samples cover (see :func:`covered_seconds`), so that its rates are not diluted by the
time before it started. Prometheus has only the agents' series: processes,
libraries, thread variables and pools need `schedwatch diagnose` run on that node.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import time
import urllib.error
import urllib.parse
from dataclasses import dataclass
from typing import Any

from agent import metrics
from agent.diagnosis.facts import Workload
from agent.diagnosis.inputs.live import fetch
from agent.diagnosis.inputs.live.sources import SourceError
from agent.diagnosis.inputs.live.window import Window
from agent.metrics import WORKLOAD_LABELS, MetricSpec
from agent.series.reading import Reading, Totals, part_of, put, ref_of
from agent.series.schema import ROLES, parts_of, sample_name

SCHEME = "prometheus+"
# What the fleet diagnosis reads of each workload: the counters' increase over the window (their rates recorded by
# deploy/prometheus/fleet_rules.yaml, one rule each) and the gauges' last values.
COUNTED: tuple[MetricSpec, ...] = (
    metrics.SCHED_YIELD_CALLS,
    metrics.FUTEX_CALLS,
    metrics.FUTEX_WAIT_SECONDS,
    metrics.RUNQUEUE_LATENCY,
    metrics.RUNQUEUE_WAIT_SECONDS,  # perf and procfs modes
    metrics.OFFCPU_SECONDS,
    metrics.OFFCPU_PERIODS,
    metrics.CPU_PERIODS,
    metrics.CPU_THROTTLED_PERIODS,
    metrics.CPU_THROTTLED_SECONDS,
    metrics.CPU_USAGE_SECONDS,
    metrics.SYSCALLS,
    metrics.SYSCALL_SECONDS,
    metrics.PRESSURE_WAITING_SECONDS,
    metrics.PRESSURE_STALLED_SECONDS,
    metrics.RUNQUEUE_WAIT_BY_HOLDER_SECONDS,
    metrics.BLOCKED_SECONDS,
    metrics.RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS,
    metrics.PROCESSES_EXITED,
    metrics.MEMORY_EVENTS,
    metrics.PAGE_FAULTS,
    metrics.MEMORY_REFAULTS,
)
GAUGED: tuple[MetricSpec, ...] = (
    metrics.CPU_LIMIT_CORES,
    metrics.THREADS,
    metrics.SYSCALL_TIMED,
    metrics.POOL_WORKERS,  # flagged workloads only
    metrics.MEMORY_LIMIT_BYTES,  # limited workloads only
)
# What every workload has, the counter first: where it grew, it tells when it was 0 (a young workload's start); the
# gauge only when the counter cannot (fewer than two samples of it).
SPAN_SERIES = (sample_name(metrics.CPU_USAGE_SECONDS), sample_name(metrics.THREADS))
EXTRAPOLATION_THRESHOLD = 1.1  # Prometheus extrapolates to a range's edge closer than this many sample intervals
BEFORE_WINDOW_SECONDS = 300  # how far before the window its base sample is looked for (Prometheus' lookback delta)
RECORDED_RATE_SECONDS = 60  # the range of rate() in deploy/prometheus/fleet_rules.yaml
QUERY_TIMEOUT = 60.0  # seconds one whole query may take
MAX_BODY_BYTES = 512 * 1024 * 1024


def recorded_name(name: str) -> str:
    """The series deploy/prometheus/fleet_rules.yaml records for counter sample *name*: its per-workload rate."""
    return "instance_workload:" + name.removesuffix("_total").removesuffix("_sum") + ":rate1m"


def is_prometheus(url: str) -> bool:
    """Whether --from names a Prometheus server."""
    return url.startswith(SCHEME)


@dataclass(frozen=True)
class NodeWindow:
    """One node's counts over the window, as two readings (0 at the start, the increase at the end)."""

    instance: str
    window: Window
    cpus: int | None = None  # the node's online CPUs (metrics.NODE_CPUS); None: an agent without that series


class PrometheusSource:
    """Queries a Prometheus server's HTTP API."""

    def __init__(self, url: str, timeout: float = QUERY_TIMEOUT, client: fetch.Client | None = None) -> None:
        base = url[len(SCHEME) :] if url.startswith(SCHEME) else url
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SourceError(f"--from {url!r}: give a Prometheus as prometheus+http://HOST:9090")
        self.base = base.rstrip("/")
        self.name = f"prometheus {self.base}"
        self._timeout = timeout
        self._client = client or fetch.Client()
        self.evaluated_at: float | None = None  # the time every query of one window is evaluated at
        self.recorded = False  # whether the last window read the fleet rules' recorded rates

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector; SourceError when the server cannot be asked or refuses the query."""
        params = {"query": expr}
        if self.evaluated_at is not None:
            params["time"] = f"{self.evaluated_at:.3f}"
        url = f"{self.base}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            document = json.loads(fetch.get(url, self._timeout, MAX_BODY_BYTES, client=self._client))
        except urllib.error.HTTPError as error:
            advice = fetch.refusal(error.code, self._client)
            if advice is not None:
                raise SourceError(f"{self.base} answered HTTP {error.code} {error.reason}: {advice}") from None
            detail = error.read(4096).decode("utf-8", "replace")
            with contextlib.suppress(ValueError, AttributeError):
                detail = str(json.loads(detail).get("error", detail))
            raise SourceError(f"{self.base} refused a query (HTTP {error.code}): {detail}") from None
        except fetch.DeadlinePassed:
            raise SourceError(
                f"{self.base} did not answer a query within {self._timeout:g} s: "
                "ask for a shorter --duration, or a single --node"
            ) from None
        except OSError as error:  # URLError, TLS errors and socket timeouts are OSErrors
            problem = fetch.tls_problem(error, self._client)
            if problem is not None:
                raise SourceError(f"Prometheus at {self.base}: {problem}") from None
            reason = getattr(error, "reason", error)
            raise SourceError(
                f"cannot reach Prometheus at {self.base}: {reason}; check the address (as a browser would use it)"
            ) from None
        except ValueError:
            raise SourceError(f"{self.base} is not a Prometheus HTTP API (its answer is not JSON)") from None
        if not isinstance(document, dict) or document.get("status") != "success":
            raise SourceError(f"{self.base} is not a Prometheus HTTP API (answer: {str(document)[:200]})")
        result = document.get("data", {}).get("result", [])
        return result if isinstance(result, list) else []

    def node_windows(self, seconds: int, node: str | None = None, at: float | None = None) -> list[NodeWindow]:
        """Every node's (or one node's) workloads over the *seconds* before *at* (a Unix time; default now);
        SourceError without schedwatch series."""
        selector = "" if node is None else f'instance=~"{_promql_string(_node_regex(node))}"'
        if not self.query(f"count({metrics.BUILD_INFO.name}{{{selector}}})"):
            where = "" if node is None else f" for a node named {node!r}"
            raise SourceError(
                f"{self.base} has no schedwatch series{where}: is it scraping the agents (job with port 17953)?"
                + (" Leave out --node to list the nodes it has." if node else "")
            )
        self.evaluated_at = round(time.time() if at is None else at, 3)
        readings: dict[str, tuple[Reading, Reading]] = {}

        def reading(instance: str) -> tuple[Reading, Reading]:
            if instance not in readings:
                readings[instance] = (Reading(0.0, frozenset(), {}), Reading(float(seconds), frozenset(), {}))
            return readings[instance]

        up: dict[str, set[str]] = {}
        for item in self.query(f"{metrics.SOURCE_UP.name}{{{selector}}} == 1"):
            labels = item["metric"]
            up.setdefault(labels.get("instance", ""), set()).add(labels.get("source", ""))
        group = ", ".join(("instance", *WORKLOAD_LABELS))
        self.recorded = bool(self.query(f"count({recorded_name(SPAN_SERIES[0])}{{{selector}}})"))
        spans = self._spans(seconds, selector)
        lookback = self._recorded_lookback(seconds, selector) if self.recorded else seconds
        for spec in COUNTED:
            name, role = sample_name(spec), ROLES[sample_name(spec)]
            by = ", ".join((group, *parts_of(spec)))
            if self.recorded:  # the fleet rules' rates, averaged over the window, times the time each one covers
                expr = f"sum by ({by}) (avg_over_time({recorded_name(name)}{{{selector}}}[{lookback}s]))"
            else:
                expr = f"sum by ({by}) ({exact_growth(f'{name}{{{selector}}}', seconds)})"
            for item in self.query(expr):
                labels = item["metric"]
                after = reading(labels.get("instance", ""))[1]
                ref = ref_of(labels)
                value = _value(item)
                if self.recorded:
                    covered = spans.get(labels.get("instance", ""), {}).get(ref)
                    if covered is None:
                        continue  # fewer than two samples of its raw series: no rate over any time
                    value = None if value is None else value * covered
                totals = after.workloads.setdefault(ref, Totals())
                put(totals, role, part_of(role, labels), math.nan if value is None else value)
        for spec in GAUGED:
            role = ROLES[spec.name]
            for item in self.query(f"max by ({group}) ({spec.name}{{{selector}}})"):
                labels = item["metric"]
                after = reading(labels.get("instance", ""))[1]
                totals = after.workloads.setdefault(ref_of(labels), Totals())
                value = _value(item)
                if value is not None:
                    put(totals, role, part_of(role, labels), value)
        cpus: dict[str, int] = {}
        for item in self.query(f"max by (instance) ({metrics.NODE_CPUS.name}{{{selector}}})"):
            value = _value(item)
            if value is not None:
                cpus[item["metric"].get("instance", "")] = int(value)
        windows = []
        for instance, (before, after) in sorted(readings.items()):
            sources = frozenset(up.get(instance, set()))
            windows.append(
                NodeWindow(
                    instance,
                    Window(
                        Reading(before.at, sources, {}),
                        Reading(after.at, sources, after.workloads),
                        spans.get(instance, {}),
                    ),
                    cpus.get(instance),
                )
            )
        return windows

    def _recorded_lookback(self, seconds: int, selector: str) -> int:
        """The range of recorded 1-minute rates whose average covers the *seconds* before the evaluation time: each
        rate looks one rule range back, so rates of the last ``seconds - 60`` s cover the window (averaging every
        rate of the window would reach a minute before it). At least one and a half of the rules' evaluation
        intervals, read from the recorded samples, so that every workload has a rate to average."""
        interval = 0.0
        for item in self.query(f"{recorded_name(SPAN_SERIES[0])}{{{selector}}}[{seconds + RECORDED_RATE_SECONDS}s]"):
            times = [float(t) for t, _ in item.get("values", [])]
            gaps = sorted(b - a for a, b in itertools.pairwise(times))
            if gaps:
                interval = max(interval, gaps[len(gaps) // 2])
        return max(seconds - RECORDED_RATE_SECONDS, math.ceil(1.5 * interval), 1)

    def _spans(self, seconds: int, selector: str) -> dict[str, dict[Workload, float]]:
        """By instance, the seconds of the window each workload's series cover: the longest of its series of the first
        of SPAN_SERIES that has two samples of it (a gauge, which cannot say when a young workload started, would
        stretch the time back half a sample interval where the counter knows better)."""
        end = time.time() if self.evaluated_at is None else self.evaluated_at
        spans: dict[str, dict[Workload, float]] = {}
        for name in SPAN_SERIES:
            known = {instance: set(node) for instance, node in spans.items()}
            for item in self.query(f"{name}{{{selector}}}[{seconds}s]"):
                samples = [(float(t), float(v)) for t, v in item.get("values", [])]
                counter = name.endswith("_total")
                covered = covered_seconds(samples, end - seconds, end, counter, exact=not self.recorded)
                if covered is None:
                    continue
                labels = item["metric"]
                instance, ref = labels.get("instance", ""), ref_of(labels)
                if ref in known.get(instance, ()):
                    continue
                node = spans.setdefault(instance, {})
                node[ref] = max(node.get(ref, 0.0), covered)
        return spans


def exact_growth(series: str, seconds: int) -> str:
    """PromQL for how much the counters of *series* (a selector) grew in the *seconds* before the evaluation time,
    exactly as sampled: the last value in the window less the last one before it, or the whole value of a series
    first sampled in the window (it counts from 0, as a workload new to two readings of an agent does). A series
    that went backwards around the window (its agent restarted) takes ``increase``, which counts across resets.
    Unlike ``increase`` alone it does not extrapolate: 400,000 yields between two scrapes are 400,000."""
    last = f"last_over_time({series}[{seconds}s])"
    base = f"last_over_time({series}[{BEFORE_WINDOW_SECONDS}s] offset {seconds}s)"
    reset = f"resets({series}[{seconds + BEFORE_WINDOW_SECONDS}s]) > 0"
    return f"((({last} - {base}) or {last}) unless {reset}) or increase({series}[{seconds}s])"


def covered_seconds(
    samples: list[tuple[float, float]], start: float, end: float, counter: bool, exact: bool = False
) -> float | None:
    """The seconds of the range (*start*, *end*] that a count over *samples* (time, value) covers; None with fewer
    than two samples.

    Prometheus' ``increase`` (*exact* false: the recorded rates are its rate) extrapolates to the sampled interval,
    plus at each edge the gap to it when under 1.1 sample intervals, else half an interval (and for a counter no
    further back than where it would have been 0). An exact count (:func:`exact_growth`) runs from the sample before
    the window (a sample interval before the first one, when that is within 1.1 intervals of the start: the series
    was there) or from where the counter was 0 as Prometheus extrapolates it, to the last sample: nothing is added
    at the end."""
    if len(samples) < 2:
        return None
    (first_t, first_v), (last_t, _) = samples[0], samples[-1]
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    growth = sum(b - a if b >= a else b for (_, a), (_, b) in itertools.pairwise(samples))
    average = sampled / (len(samples) - 1)
    to_start, to_end = first_t - start, end - last_t
    threshold = average * EXTRAPOLATION_THRESHOLD
    there_at_start = to_start < threshold
    if exact:
        to_start = average if there_at_start else to_start
    if counter and growth > 0 and first_v >= 0:
        to_start = min(to_start, sampled * first_v / growth)
    before = to_start if to_start < threshold else average / 2
    if exact:
        return sampled + before
    return sampled + before + (to_end if to_end < threshold else average / 2)


def _value(item: dict[str, Any]) -> float | None:
    """An instant vector element's number; None for NaN (Prometheus has no number for that series)."""
    value = float(item["value"][1])
    return None if math.isnan(value) else value


def _node_regex(node: str) -> str:
    """The instance label of *node*: the name as given, or with any port."""
    return re.escape(node) + r"(:[0-9]+)?"


def _promql_string(text: str) -> str:
    """*text* inside a double-quoted PromQL string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
