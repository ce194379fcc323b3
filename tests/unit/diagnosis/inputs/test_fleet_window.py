"""Rates through Prometheus over the time each workload existed in the window, on a recorded Prometheus answer.

tests/unit/fixtures/prometheus/young_workload_range.json: every answer a real Prometheus 2.42 (scraping every 2 s)
gave diagnose's queries over a 30 s window, recorded by query (python -m tests.support.record_fleet_window). It
scraped a server whose workload /old ran the whole time at 0.75 CPU (0.5 user, 0.25 system) and 1000 sched_yield/s,
and whose workload /young appeared 23 s before the window's end at 2 CPUs (1.5 user, 0.5 system) and 4000
sched_yield/s (its counters start at 0 then).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.diagnosis.facts import Workload
from agent.diagnosis.inputs.live.fleet import PrometheusSource, covered_seconds
from agent.diagnosis.inputs.live.window import workload_view
from tests.unit.locations import UNIT_FIXTURES

RECORDED = UNIT_FIXTURES / "prometheus" / "young_workload_range.json"
# The served counters are computed when the scrape is answered, Prometheus stamps the scrape's start: a few ms
# apart in a 2 s interval, so a rate over >= 20 s is off by well under 0.5 %.
SCRAPE_JITTER = 0.005


class _Replay(PrometheusSource):
    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__("prometheus+http://prometheus.invalid:9090")
        self.answers = answers
        self.asked: list[str] = []

    def query(self, expr: str) -> list[dict[str, Any]]:
        self.asked.append(expr)
        # The recording's server served no series the later queries ask for (syscall families, pressure): for
        # those a real Prometheus answers an empty vector, as here.
        return self.answers.get(expr, [])


def _recorded() -> tuple[_Replay, float, int]:
    document = json.loads(RECORDED.read_text())
    return _Replay(document["answers"]), float(document["evaluated_at"]), int(document["seconds"])


def test_a_workload_younger_than_the_window_is_not_diluted() -> None:
    source, at, seconds = _recorded()
    (node,) = source.node_windows(seconds, at=at)
    young = workload_view(node.window, Workload(cgroup="/young"), None)
    old = workload_view(node.window, Workload(cgroup="/old"), None)
    assert young.seconds is not None and 20.0 < young.seconds < 25.0, "it existed ~23 s of the 30 s window"
    assert old.seconds == pytest.approx(30.0, rel=SCRAPE_JITTER), "a workload there all along covers the window"
    assert young.cpu_used_cores == pytest.approx(2.0, rel=SCRAPE_JITTER)
    assert young.rate(young.sched_yield_calls) == pytest.approx(4000.0, rel=SCRAPE_JITTER)
    assert old.cpu_used_cores == pytest.approx(0.75, rel=SCRAPE_JITTER)
    assert old.rate(old.sched_yield_calls) == pytest.approx(1000.0, rel=SCRAPE_JITTER)
    assert young.cpu_used_cores * young.seconds / seconds < 1.7, "over the whole window: diluted under 1.7 CPUs"


def test_counts_are_the_samples_differences_not_extrapolated() -> None:
    """The young workload's count is the value of its last sample in the window (from 0), not scaled up to the
    window's end as increase() would: 4000 yields for each of its seconds at that scrape, which its user CPU time
    (1.5 s a second, served in the same scrape) tells."""
    source, at, seconds = _recorded()
    (young_user,) = [
        item["values"]
        for item in source.answers[f"schedwatch_cpu_usage_seconds_total{{}}[{seconds}s]"]
        if item["metric"]["cgroup"] == "/young" and item["metric"]["mode"] == "user"
    ]
    age_at_last_sample = float(young_user[-1][1]) / 1.5
    assert float(young_user[-1][0]) < at, "the last scrape before the window's end"
    (node,) = source.node_windows(seconds, at=at)
    young = workload_view(node.window, Workload(cgroup="/young"), None)
    assert young.sched_yield_calls == pytest.approx(4000 * age_at_last_sample, rel=1e-6)
    old = workload_view(node.window, Workload(cgroup="/old"), None)
    assert old.sched_yield_calls == pytest.approx(1000 * seconds, rel=SCRAPE_JITTER), "15 intervals of 2 s"


def test_the_covered_time_is_what_increase_extrapolates_to() -> None:
    # samples every 10 s from 40 to 80 in the range (0, 100]: the start is 40 s (> 1.1 intervals) away, so half an
    # interval (5 s); the end 20 s away, so 5 s too; a gauge is not clipped at 0
    samples = [(40.0, 7.0), (50.0, 8.0), (60.0, 9.0), (70.0, 10.0), (80.0, 11.0)]
    assert covered_seconds(samples, 0.0, 100.0, counter=False) == 50.0
    # a counter from 2 growing 1 per second: it was 0 two seconds before its first sample, not five
    counter = [(40.0, 2.0), (50.0, 12.0), (60.0, 22.0)]
    assert covered_seconds(counter, 0.0, 100.0, counter=True) == 20.0 + 2.0 + 5.0
    # edges closer than 1.1 intervals are extrapolated to in full: 9 s to the start, 10 s to the end
    assert covered_seconds([(9.0, 100.0), (19.0, 110.0), (29.0, 120.0)], 0.0, 39.0, counter=True) == 39.0
    # a reset counts the value after it as growth (10 + 5 + 10 = 25), so the zero clip uses 25, not -5
    reset = [(40.0, 50.0), (50.0, 60.0), (60.0, 5.0), (70.0, 15.0)]
    assert covered_seconds(reset, 0.0, 75.0, counter=True) == 30.0 + 5.0 + 5.0
    # an exact count runs from the sample before the window (one interval before a first sample near the start,
    # else from where it was 0 or half an interval back) to the last sample: nothing is added at the end
    assert covered_seconds([(9.0, 100.0), (19.0, 110.0), (29.0, 120.0)], 0.0, 39.0, counter=True, exact=True) == 30.0
    assert covered_seconds(counter, 0.0, 100.0, counter=True, exact=True) == 20.0 + 2.0
    assert covered_seconds(samples, 0.0, 100.0, counter=False, exact=True) == 40.0 + 5.0
    assert covered_seconds([(40.0, 1.0)], 0.0, 100.0, counter=True) is None, "one sample: increase has no value"


def test_the_ranking_shows_the_time_each_workloads_rates_cover() -> None:
    from agent.commands.diagnose import fleet_ranking, fleet_text
    from agent.identity.filter import Filter

    source, at, seconds = _recorded()
    ranking = fleet_ranking(source.node_windows(seconds, at=at), Filter(), seconds)
    rows = {row["workload"]["cgroup"]: row for row in ranking["workloads"]}
    assert ranking["window_seconds"] == 30
    assert rows["/old"]["seconds"] == pytest.approx(30.0, rel=SCRAPE_JITTER)
    assert 20.0 < rows["/young"]["seconds"] < 25.0
    assert rows["/young"]["sched_yield_per_second"] == pytest.approx(4000.0, rel=SCRAPE_JITTER)
    young_line = next(line for line in fleet_text(ranking, "x").splitlines() if "/young" in line)
    assert f"over {rows['/young']['seconds']:.0f} s" in young_line
