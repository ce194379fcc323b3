"""`python -m bench [SUITE ...] [--repetitions N]`: run benchmarks, print Markdown, keep raw JSON."""

from __future__ import annotations

import argparse
import json
import time

from bench import (
    attribution,
    event_cost,
    exits,
    families,
    fleet,
    modes,
    offline_inputs,
    overhead,
    processes,
    sched,
    scrape,
    site_parts,
    switch_cost,
    switch_parts,
    syscalls,
)
from bench.common import BENCH

SUITES = {
    "syscalls": syscalls,
    "sched": sched,
    "modes": modes,
    "processes": processes,
    "switch_cost": switch_cost,
    "switch_parts": switch_parts,
    "site_parts": site_parts,
    "scrape": scrape,
    "families": families,
    "exits": exits,
    "fleet": fleet,
    "attribution": attribution,
    "offline_inputs": offline_inputs,
    "overhead": overhead,
    "event_cost": event_cost,
}


def main() -> None:
    """Run the chosen suites (all by default) and report each."""
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("suites", nargs="*", choices=[*SUITES, []], default=list(SUITES))
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        help="overhead only: compare this configuration beside nothing attached (repeat it for more; e.g. "
        "--config 'schedwatch, defaults' --config runqlat-bpfcc); all of them when not given",
    )
    args = parser.parse_args()
    if args.config and set(args.suites or SUITES) != {"overhead"}:
        parser.error(
            "--config chooses the overhead suite's configurations: run `python -m bench overhead --config ...`"
        )
    for name in args.suites or SUITES:
        suite = SUITES[name]
        if suite is overhead:
            result = overhead.run(args.repetitions, tuple(args.config))
        else:
            result = suite.run(args.repetitions)
        out = BENCH / "results" / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        print(f"## {name}\n\n{suite.report(result)}\n\nraw samples: {out}\n", flush=True)


if __name__ == "__main__":
    main()
