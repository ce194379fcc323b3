"""The agent image's footprint: its size, its biggest parts, and its start time under the DaemonSet's options.

Usage (root, Podman, from the repository): .venv/bin/python scripts/image-footprint.py [IMAGE] [--runs N]

Start time: from `podman run` (the DaemonSet's capabilities, mounts and arguments, read from the manifest, on the
host's network) until /metrics first answers 200. The agent listens only after its BPF programs are compiled and
attached, so this includes bcc's compilation. Each run is a new container; the median of the runs is reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from tests.support.containers import daemonset_run_options  # noqa: E402

DAEMONSET = REPO / "deploy" / "kubernetes" / "base" / "daemonset.yaml"


def podman(*args: str) -> str:
    return subprocess.run(["podman", *args], check=True, capture_output=True, text=True).stdout.strip()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_seconds(image: str, name: str, timeout: float = 120.0) -> float:
    """Seconds from `podman run` until /metrics answers 200."""
    options, args = daemonset_run_options(yaml.safe_load(DAEMONSET.read_text()))
    port = free_port()
    args = [a if not a.startswith("--listen=") else f"--listen=127.0.0.1:{port}" for a in args]
    url = f"http://127.0.0.1:{port}/metrics"
    started = time.monotonic()
    podman("run", "-d", "--name", name, "--network=host", *options, image, *args)
    try:
        while time.monotonic() - started < timeout:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{image} did not serve {url} within {timeout}s:\n{podman('logs', name)[-3000:]}")
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "10", name], capture_output=True)


def biggest(image: str, count: int) -> list[tuple[int, str]]:
    """The image's biggest files, with its top directories' totals, from its mounted filesystem."""
    root = Path(podman("image", "mount", image))
    try:
        sizes: list[tuple[int, str]] = []
        for directory, _subdirs, files in os.walk(root):
            for file in files:
                path = Path(directory) / file
                if not path.is_symlink():
                    sizes.append((path.stat().st_size, "/" + str(path.relative_to(root))))
    finally:
        podman("image", "unmount", image)
    tops: dict[str, int] = {}
    for size, path in sizes:
        top = "/".join(path.split("/")[:3])
        tops[top] = tops.get(top, 0) + size
    print(f"  files: {len(sizes)}, {sum(s for s, _ in sizes) / 1e6:.1f} MB")
    print("  by directory:")
    for top, size in sorted(tops.items(), key=lambda item: -item[1])[:count]:
        print(f"    {size / 1e6:7.1f} MB  {top}")
    return sorted(sizes, reverse=True)[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image", nargs="?", default="localhost/schedwatch:0.1.0")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=12, help="how many of the biggest files and directories")
    options = parser.parse_args()
    image = options.image
    size = int(podman("image", "inspect", image, "--format", "{{.Size}}"))
    listed = podman("images", "--format", "{{.Size}}", image)
    print(f"{image}: {size} bytes ({size / 1e6:.0f} MB); podman images: {listed}")
    for size_, path in biggest(image, options.top):
        print(f"    {size_ / 1e6:7.1f} MB  {path}")
    if options.runs:
        times = [start_seconds(image, f"schedwatch-footprint-{os.getpid()}-{run}") for run in range(options.runs)]
        print(f"start to /metrics: {', '.join(f'{t:.2f}' for t in times)} s; median {statistics.median(times):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
