"""Cost of the agent's standing findings (agent/diagnosis/standing.py) next to writing out the scrape they judge.

`python -m bench.standing [--workloads N] [--repetitions N]`: the unit tests' two recorded scrapes of a real agent,
their workloads repeated to N, parsed once. Per repetition: the exposition text of the second scrape
(prometheus_client's generate_latest), and one evaluation over two readings, with no workload flagged (the second
scrape twice) and with three in four flagged (the recorded yield storm, throttling and lock convoy). Medians, ms.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from agent.diagnosis.standing import StandingFindings
from bench.common import median

RECORDED = Path(__file__).parent.parent / "tests" / "unit" / "fixtures" / "metrics"
TEST_CGROUPS = 'cgroup="/schedwatch-test'  # the recorded scrape's four test workloads (see its README)


def repeated(text: str, workloads: int) -> list[Metric]:
    """*text*'s families with each test workload's samples repeated under workloads // 4 distinct cgroups."""
    lines = []
    for line in text.splitlines():
        if TEST_CGROUPS in line and not line.startswith("#"):
            lines += [line.replace(TEST_CGROUPS, f'cgroup="/w{i}/schedwatch-test') for i in range(workloads // 4)]
        else:
            lines.append(line)
    return list(text_string_to_metric_families("\n".join(lines) + "\n"))


class _Served(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def evaluation_seconds(first: list[Metric], second: list[Metric]) -> tuple[float, int]:
    """Seconds one evaluation of *second* after *first* takes, and the findings it makes."""
    now = [0.0]
    findings = StandingFindings(2, clock=lambda: now[0])
    findings.hand_over(first)
    findings.evaluate_pending()
    now[0] = 20.0
    started = time.perf_counter()
    findings.hand_over(second)
    findings.evaluate_pending()
    seconds = time.perf_counter() - started
    return seconds, len(findings.family().samples)


def main() -> None:
    """Measure and print one Markdown line."""
    parser = argparse.ArgumentParser(prog="python -m bench.standing")
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--repetitions", type=int, default=11)
    args = parser.parse_args()
    before = repeated((RECORDED / "agent-before.txt").read_text(), args.workloads)
    after = repeated((RECORDED / "agent-after.txt").read_text(), args.workloads)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Served(after))
    serialize, quiet, storm = [], [], []
    for _ in range(args.repetitions):
        started = time.perf_counter()
        generate_latest(registry)
        serialize.append(time.perf_counter() - started)
        seconds, none = evaluation_seconds(after, after)
        quiet.append(seconds)
        seconds, found = evaluation_seconds(before, after)
        storm.append(seconds)
    samples = sum(len(family.samples) for family in after)
    print(
        f"| {samples:,} samples, {args.workloads:,} workloads | text {median(serialize) * 1000:.0f} ms "
        f"| evaluation, none flagged: {median(quiet) * 1000:.0f} ms ({none} findings) "
        f"| three in four flagged: {median(storm) * 1000:.0f} ms ({found} findings) |"
    )


if __name__ == "__main__":
    main()
