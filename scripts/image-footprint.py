"""The agent image's footprint: its size, its biggest parts, and its start time under the DaemonSet's options.

Usage (root, Podman, from the repository): .venv/bin/python scripts/image-footprint.py [IMAGE ...] [--runs N] [--top N]

Start time: from `podman run` (the DaemonSet's capabilities, mounts and arguments, read from the manifest, on the
host's network) until /metrics first answers 200. The agent listens only after its BPF programs are compiled and
attached, so this includes bcc's compilation. Each run is a new container; the median of the runs is reported, with
the agent's CPU time (user + system) by then, which depends less on what else the machine runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
import zlib
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


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (from the host's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_seconds(image: str, name: str, timeout: float = 120.0) -> tuple[float, float]:
    """Seconds from `podman run` until /metrics answers 200, and the agent's CPU seconds by then."""
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
                        elapsed = time.monotonic() - started
                        return elapsed, cpu_seconds(int(podman("inspect", name, "--format", "{{.State.Pid}}")))
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{image} did not serve {url} within {timeout}s:\n{podman('logs', name)[-3000:]}")
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "10", name], capture_output=True)


def group(path: str) -> str:
    """What a file belongs to, for the totals: a library or program by itself, a Python package, a directory."""
    parts = path.split("/")
    if path.startswith("/usr/lib/python3.") and "dist-packages" not in parts:
        return "/".join(parts[:4]) + " (standard library)"
    if "site-packages" in parts or "dist-packages" in parts:
        at = parts.index("site-packages" if "site-packages" in parts else "dist-packages")
        return "/".join(parts[: at + 2])
    return "/".join(parts[:5])


def contents(image: str, count: int) -> None:
    """The image's biggest parts and files, from its mounted filesystem (a hard-linked file counted once)."""
    root = Path(podman("image", "mount", image))
    try:
        sizes: list[tuple[int, str]] = []
        seen: set[tuple[int, int]] = set()
        for directory, _subdirs, files in os.walk(root):
            for file in files:
                path = Path(directory) / file
                stat = path.lstat()
                if path.is_symlink() or (stat.st_dev, stat.st_ino) in seen:
                    continue
                seen.add((stat.st_dev, stat.st_ino))
                sizes.append((stat.st_size, "/" + str(path.relative_to(root))))
    finally:
        podman("image", "unmount", image)
    groups: dict[str, int] = {}
    for size, path in sizes:
        groups[group(path)] = groups.get(group(path), 0) + size
    print(f"  {len(sizes)} files, {sum(s for s, _ in sizes) / 1e6:.1f} MB; the biggest parts:")
    for name, size in sorted(groups.items(), key=lambda item: -item[1])[:count]:
        print(f"    {size / 1e6:7.1f} MB  {name}")


def compressed_bytes(image: str) -> int:
    """The image as `podman save` writes it, gzip-compressed (about what a registry stores and a node pulls)."""
    save = subprocess.Popen(["podman", "save", "--format", "docker-archive", image], stdout=subprocess.PIPE)
    assert save.stdout is not None
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    total = 0
    while chunk := save.stdout.read(1 << 20):
        total += len(compressor.compress(chunk))
    total += len(compressor.flush())
    if save.wait() != 0:
        raise RuntimeError(f"podman save {image} failed")
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="*", default=["localhost/schedwatch:0.1.0"], metavar="IMAGE")
    parser.add_argument("--runs", type=int, default=5, help="start runs per image (interleaved across images)")
    parser.add_argument("--top", type=int, default=15, help="how many of the biggest parts to list")
    parser.add_argument("--no-compressed", dest="compressed", action="store_false", help="skip the gzip size")
    options = parser.parse_args()
    for image in options.images:
        size = int(podman("image", "inspect", image, "--format", "{{.Size}}"))
        lines = podman("images", "--format", "{{.Repository}}:{{.Tag}} {{.Size}}").splitlines()
        listed = next((line.split(" ", 1)[1] for line in lines if line.split(" ", 1)[0] == image), "?")
        print(f"{image}: {size} bytes ({size / 1e6:.0f} MB); podman images: {listed}")
        if options.top:
            contents(image, options.top)
        if options.compressed:
            print(f"  gzip-compressed (podman save | gzip -6): {compressed_bytes(image) / 1e6:.0f} MB")
    # One run of each image in turn, so that what else the machine does hits them alike.
    runs: dict[str, list[tuple[float, float]]] = {image: [] for image in options.images}
    for run in range(options.runs):
        for image in options.images:
            runs[image].append(start_seconds(image, f"schedwatch-footprint-{os.getpid()}-{run}"))
    for image, measured in runs.items():
        if not measured:
            continue
        print(f"{image}, {len(measured)} starts:")
        for what, values in (
            ("start to /metrics", [m[0] for m in measured]),
            ("agent CPU by then", [m[1] for m in measured]),
        ):
            print(f"  {what}: {', '.join(f'{v:.2f}' for v in values)} s; median {statistics.median(values):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
