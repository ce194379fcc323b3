"""How big the load tests are: short in `make test`, the issue's full sizes in `make load` (SCHEDWATCH_LOAD=full).

Each load test also records what it measured: printed, and appended as one JSON line to
$SCHEDWATCH_LOAD_OUT/results.jsonl when that is set (docs/load-and-soak.md is written from it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

FULL = os.environ.get("SCHEDWATCH_LOAD") == "full"


def size(short: int, full: int) -> int:
    """*full* under `make load`, *short* otherwise."""
    return full if FULL else short


def record(test: str, **numbers: object) -> None:
    """Print what a load test measured and keep it in results.jsonl if asked to."""
    line = json.dumps({"test": test, "full": FULL, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **numbers})
    print(line)
    out = os.environ.get("SCHEDWATCH_LOAD_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        with (Path(out) / "results.jsonl").open("a") as handle:
            handle.write(line + "\n")
