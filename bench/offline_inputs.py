"""Issue-34 benchmark: what `schedwatch analyze` costs on the inputs a person points it at, hostile ones included.

`python -m bench offline_inputs [--repetitions N]`: each input is made in a temporary directory and read by a fresh
`python -m agent analyze --json` process (so its peak memory is its own), timed by wall clock; its peak resident
memory is the child's ru_maxrss. Medians over the repetitions.

- 64 MiB of `perf trace -s`: the seed's GCP summary repeated (about 11,000 summaries in one file), each read;
- 5,000 small files that are not tool output (4,990 text, 9 binary, 1 empty) with one real trace among them;
- a 6.8 MB binary (a NUL byte in its first block), refused before the rest is read;
- 60 MB of text that is no tool's output (log lines), refused after detection.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import BENCH

ROOT = BENCH.parent

SEED = ROOT / "tests" / "unit" / "fixtures" / "artifacts" / "gcp_perf_trace_s.txt"
MIB = 1024 * 1024


def _big_trace(folder: Path) -> list[Path]:
    seed = SEED.read_bytes()
    copies = (64 * MIB - 1) // (len(seed) + 1)
    path = folder / "perf-trace-many.txt"
    path.write_bytes(b"\n".join([seed] * copies))
    return [path]


def _many_files(folder: Path) -> list[Path]:
    for index in range(4990):
        (folder / f"notes-{index:04}.txt").write_text(f"meeting notes {index}: the VM felt slow on Tuesday\n")
    for index in range(9):
        (folder / f"core-{index}.bin").write_bytes(b"\x7fELF\x00\x01" + os.urandom(4096))
    (folder / "empty.txt").write_bytes(b"")
    (folder / "perf-trace.txt").write_bytes(SEED.read_bytes())
    return [folder]


def _binary(folder: Path) -> list[Path]:
    path = folder / "core.bin"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(int(6.8 * 1000 * 1000)))
    return [path]


def _big_log(folder: Path) -> list[Path]:
    path = folder / "app.log"
    line = b"2026-12-07T05:00:00Z INFO request served in 12 ms from worker 7 of the pool\n"
    path.write_bytes(line * (60 * 1000 * 1000 // len(line)))
    return [path]


INPUTS = {
    "64 MiB perf trace -s (many summaries)": _big_trace,
    "5,000 files, one trace": _many_files,
    "6.8 MB binary": _binary,
    "60 MB log (no tool's output)": _big_log,
}


# A parent of its own per run: RUSAGE_CHILDREN's ru_maxrss is then that one analyze's peak, not the largest so far.
MEASURE = (
    "import resource, subprocess, sys, time; started = time.perf_counter(); "
    "done = subprocess.run([sys.executable, '-m', 'agent', 'analyze', '--json', *sys.argv[1:]], "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)"
)


def _once(paths: list[Path]) -> tuple[float, float, int]:
    """(seconds, peak MiB, exit status) of one analyze of *paths* in a child process."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *map(str, paths)], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), int(out[1]) / 1024, int(out[2])


def run(repetitions: int) -> dict[str, Any]:
    """Each input made once, analysed *repetitions* times."""
    results: dict[str, Any] = {}
    for name, make in INPUTS.items():
        with tempfile.TemporaryDirectory(prefix="sw-offline-") as folder:
            paths = make(Path(folder))
            samples = [_once(paths) for _ in range(repetitions)]
        results[name] = {
            "seconds": [sample[0] for sample in samples],
            "peak_mib": [sample[1] for sample in samples],
            "status": samples[-1][2],
        }
    return results


def report(result: dict[str, Any]) -> str:
    """A Markdown table: median seconds, peak memory, exit status per input."""
    lines = ["| input | median s | median peak MiB | exit |", "| --- | --- | --- | --- |"]
    for name, sample in result.items():
        seconds, peak = statistics.median(sample["seconds"]), statistics.median(sample["peak_mib"])
        lines.append(f"| {name} | {seconds:.2f} | {peak:.0f} | {sample['status']} |")
    return "\n".join(lines)
