"""python -m tests.scenarios.calibration_table RESULTS.jsonl...: the calibration runs as a markdown table.

One row per scenario: the median over its runs, and the spread (min-max) where there is more than one run.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from tests.scenarios.catalog import BY_NAME

COLUMNS = (
    ("CPUs allowed", lambda r: r["cpus_allowed"], "{:.2g}"),
    ("threads", lambda r: r["threads"], "{:.0f}"),
    ("CPU used (cores)", lambda r: r["cpu_cores"], "{:.2f}"),
    ("system share", lambda r: r["system_share"], "{:.1%}"),
    ("yields/s per CPU", lambda r: r["yields_per_cpu"], "{:,.0f}"),
    ("futex wait calls/s", lambda r: r["futex_per_s"]["wait"], "{:,.0f}"),
    ("futex wake calls/s", lambda r: r["futex_per_s"]["wake"], "{:,.0f}"),
    (
        "futex other ops/s",
        lambda r: sum(v for k, v in r["futex_per_s"].items() if k not in ("wait", "wake")),
        "{:,.0f}",
    ),
    ("futex wait s/s", lambda r: r["futex_wait"], "{:.2f}"),
    ("run-queue wait s/s per CPU", lambda r: r["runq_wait_per_cpu"], "{:.3f}"),
    ("run-queue waits/s", lambda r: r["runq_waits_per_s"], "{:,.0f}"),
    ("preempted s/s", lambda r: r["preempted"], "{:.3f}"),
    ("throttled periods / periods", lambda r: r["throttled_ratio"], "{:.0%}"),
    ("throttled s/s", lambda r: r["throttled_seconds"], "{:.2f}"),
    ("load (1 min)", lambda r: r["load"], "{:.1f}"),
    ("scrape s", lambda r: r.get("scrape_seconds"), "{:.1f}"),
)


def cell(values: list[float | None], form: str) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    median = form.format(statistics.median(present))
    if len(present) == 1:
        return median
    low, high = form.format(min(present)), form.format(max(present))
    return median if low == high else f"{median} ({low}-{high})"


def table(results: list[dict[str, object]]) -> str:
    by_scenario: dict[str, list[dict[str, object]]] = defaultdict(list)
    for result in results:
        by_scenario[str(result["scenario"])].append(result)
    header = ["scenario", "expected", "runs", *(name for name, _, _ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, runs in by_scenario.items():
        expected = str(BY_NAME[name].expected) if name in BY_NAME else "?"
        cells = [cell([read(r) for r in runs], form) for _, read, form in COLUMNS]
        lines.append("| " + " | ".join([name, expected, str(len(runs)), *cells]) + " |")
    return "\n".join(lines)


def main(paths: list[str]) -> None:
    results = [json.loads(line) for path in paths for line in Path(path).read_text().splitlines() if line.strip()]
    print(table(results))


if __name__ == "__main__":
    main(sys.argv[1:])
