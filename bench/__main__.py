"""`python -m bench [--repetitions N]`: run the benchmarks, print Markdown, save raw JSON in bench/results/."""

from __future__ import annotations

import argparse
import json
import time

from bench import syscalls
from bench.common import BENCH


def main() -> None:
    """Run the syscall-probe benchmark and report it."""
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--repetitions", type=int, default=7)
    args = parser.parse_args()
    result = syscalls.run(args.repetitions)
    out = BENCH / "results" / f"syscalls-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(syscalls.report(result))
    print(f"\nraw samples: {out}")


if __name__ == "__main__":
    main()
