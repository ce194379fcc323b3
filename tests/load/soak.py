"""The soak: cgroup churn against the real agent for a long time (`make soak`; an hour of 1,000 cgroups).

    python -m tests.load.soak --duration 3600 --cgroups 1000 --grace 30 --out soak-out

Writes soak-out/soak.json (every round and sample) and soak-out/samples.csv (RSS, map entries and series over
time), prints one line per round, and exits 1 if any yield was lost, any series or map entry outlived its grace
period, or the agent's RSS grew by more than --rss-tolerance between the first and the last round.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.load.churn import Churn, Sample
from tests.support.agent import AgentProcess, require_root
from tests.support.workloads import CgroupSandbox, build


def rss_growth(samples: list[Sample]) -> float:
    """RSS after the last round's grace period over RSS after the first's (1.0 = flat)."""
    settled = [sample.rss_kb for sample in samples if sample.phase == "expired"]
    return settled[-1] / settled[0] if settled else float("nan")


def write_outputs(out: Path, churn: Churn) -> None:
    """soak.json with everything, samples.csv with the time series."""
    report = churn.report()
    (out / "soak.json").write_text(json.dumps(report, indent=1))
    maps = sorted({name for sample in churn.samples for name in sample.map_entries})
    with (out / "samples.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "seconds",
                "phase",
                "round",
                "rss_kb",
                "rss_anon_kb",
                "series",
                "series_ours",
                "kernel_cgroup_keys",
                "scrape_seconds",
                *maps,
            ]
        )
        for sample in churn.samples:
            writer.writerow(
                [
                    sample.seconds,
                    sample.phase,
                    sample.round,
                    sample.rss_kb,
                    sample.rss_anon_kb,
                    sample.series,
                    sample.series_ours,
                    sample.kernel_cgroup_keys,
                    sample.scrape_seconds,
                    *(sample.map_entries.get(name, "") for name in maps),
                ]
            )


def summarize(report: dict[str, Any]) -> str:
    """Markdown tables of a soak.json: every round, and the agent's memory every five minutes."""
    samples = report["samples"]
    by_round = {(sample["round"], sample["phase"]): sample for sample in samples}
    lines = [
        "| round | at (s) | yields expected | seen live | seen after removal | our series live / after grace "
        "| map keys left | RSS after grace (kB) | anon (kB) | live scrape (s) | failed scrapes in the round |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    failures = report.get("scrape_failures", [])
    starts = [0.0] + [by_round[(r["round"], "expired")]["seconds"] for r in report["rounds"]]
    for result in report["rounds"]:
        number = result["round"]
        live, expired = by_round[(number, "live")], by_round[(number, "expired")]
        after = f"{result['yields_seen_removed']:,}" if result.get("removed_checked", True) else "unchecked"
        lines.append(
            f"| {number} | {live['seconds']:.0f} | {result['yields_expected']:,} | {result['yields_seen_live']:,} "
            f"| {after} | {live['series_ours']:,} / {expired['series_ours']} | {result['map_keys_left']} "
            f"| {expired['rss_kb']:,} | {expired['rss_anon_kb']:,} | {live['scrape_seconds']} "
            f"| {sum(1 for at, _ in failures if starts[number - 1] < at <= expired['seconds'])} |"
        )
    lines += ["", "| minute | phase | RSS (kB) | anon (kB) | series (whole scrape) | per-workload map keys |"]
    lines.append("| --- | --- | --- | --- | --- | --- |")
    next_minute = 0.0
    for sample in samples:
        if sample["seconds"] >= next_minute * 60:
            memory = f"{sample['rss_kb']:,} | {sample['rss_anon_kb']:,}"
            lines.append(
                f"| {sample['seconds'] / 60:.1f} | {sample['phase']} | {memory} "
                f"| {sample['series']:,} | {sample['kernel_cgroup_keys']:,} |"
            )
            next_minute += 5
    kinds = sorted({error for _, error in failures})
    lines += ["", f"Failed scrapes: {len(failures)} ({'; '.join(kinds) or 'none'})."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=3600, help="seconds of churn (rounds start until then)")
    parser.add_argument("--cgroups", type=int, default=1000, help="cgroups made and removed per round")
    parser.add_argument("--grace", type=float, default=30, help="the agent's --series-grace")
    parser.add_argument("--interval", type=float, default=15, help="seconds between background samples")
    parser.add_argument("--rss-tolerance", type=float, default=0.10, help="allowed RSS growth, first to last round")
    parser.add_argument("--out", type=Path, default=Path("soak-out"))
    parser.add_argument("--summarize", type=Path, metavar="SOAK_JSON", help="print a soak.json as markdown tables")
    args = parser.parse_args(argv)
    if args.summarize:
        print(summarize(json.loads(args.summarize.read_text())))
        return 0
    require_root()
    args.out.mkdir(parents=True, exist_ok=True)
    yielder = build("yielder")
    sandbox = CgroupSandbox()
    agent = AgentProcess(
        args.out / "agent.log", "--series-grace", str(args.grace), "--state-dir", str(args.out / "state")
    )
    failures: list[str] = []
    churn = Churn(agent, sandbox, yielder, args.cgroups, args.grace)
    try:
        agent.wait_ready()
        churn.sample("baseline", 0)
        deadline = time.monotonic() + args.duration
        with churn.periodic_samples(args.interval):
            while time.monotonic() < deadline:
                result = churn.run_round()
                last = churn.samples[-1]
                print(
                    f"round {result.round}: {result.cgroups} cgroups, yields {result.yields_expected} expected, "
                    f"{result.yields_seen_live} seen live, {result.yields_seen_removed} after removal; "
                    f"left after grace: {result.series_left} series, {result.map_keys_left} map keys; "
                    f"RSS {last.rss_kb} kB (anon {last.rss_anon_kb}); {result.seconds} s",
                    flush=True,
                )
                if churn.scrape_failures:
                    print(f"  scrapes failed so far: {len(churn.scrape_failures)}", flush=True)
                if not result.removed_checked:
                    print(f"  {result.problems()}", flush=True)
                if not result.lost_nothing:
                    failures.append(result.problems())
                write_outputs(args.out, churn)
        if churn.scrape_failures:
            failures.append(f"{len(churn.scrape_failures)} scrapes failed, first: {churn.scrape_failures[0]}")
        growth = rss_growth(churn.samples)
        print(f"RSS after the last round / after the first: {growth:.3f}", flush=True)
        if not growth <= 1 + args.rss_tolerance:
            failures.append(f"RSS grew {growth:.3f}x, more than {1 + args.rss_tolerance:.2f}x")
    finally:
        write_outputs(args.out, churn)
        code = agent.stop()
        sandbox.cleanup()
    if code != 0:
        failures.append(f"agent exited with {code}")
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
