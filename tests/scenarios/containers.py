"""Scenarios in Podman containers with a CPU limit (`podman run --cpus`), as a pipeline runs in a cluster.

Callers hold the containers lock (/tmp/schedwatch-containers.lock): Podman's socket and image store are shared.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.scenarios.catalog import HEALTHY, POOL, Expected, data_file
from tests.support.containers import IMAGE, REPO, Podman
from tests.support.workloads import BUILD, build

WORKLOAD_IMAGE = "localhost/schedwatch-workload:test"  # tests/workloads/Containerfile: numpy 1.26 and 2.x venvs


@dataclass(frozen=True)
class ContainerScenario:
    """A command run in a container of *image* limited to *cpus* CPUs, for a bounded time."""

    name: str
    expected: Expected
    image: str
    argv: Callable[[float], list[str]]
    cpus: float
    description: str = ""
    memory: int | None = None  # bytes (podman run --memory); None: no limit


def _numpy_pool(threads: str) -> Callable[[float], list[str]]:
    return lambda seconds: ["/opt/numpy1/bin/python", "/numpy_pool.py", "-", "4", threads, f"{seconds:g}s", "0"]


CONTAINER_SCENARIOS = {
    scenario.name: scenario
    for scenario in (
        ContainerScenario(
            "container-numpy126-pool",
            Expected(POOL, "yield-storm"),
            WORKLOAD_IMAGE,
            _numpy_pool("unset"),
            cpus=2.0,
            description="numpy 1.26.4 in a 4-worker Pool, BLAS threads unset, in a container with --cpus 2",
        ),
        ContainerScenario(
            "container-throttled",
            Expected("cpu-throttling"),
            IMAGE,
            lambda seconds: ["/w/hogs", "-", "1", f"{seconds:g}"],
            cpus=0.5,
            description="1 CPU-bound process in a container with --cpus 0.5",
        ),
        ContainerScenario(
            "container-memory-reclaim",
            Expected("memory-pressure", "reclaim"),
            IMAGE,
            lambda seconds: ["/w/file_reader", "-", f"{seconds:g}", f"/w/{data_file(192).name}"],
            cpus=2.0,
            memory=96 << 20,
            description="a 192 MiB file read over and over in a container with --memory 96m",
        ),
        ContainerScenario(
            "container-healthy-memory-fits",
            HEALTHY,
            IMAGE,
            lambda seconds: ["/w/file_reader", "-", f"{seconds:g}", f"/w/{data_file(192).name}"],
            cpus=2.0,
            memory=512 << 20,
            description="the same file in a container with --memory 512m: it stays cached",
        ),
        ContainerScenario(
            "container-healthy-numpy126-pool",
            HEALTHY,
            WORKLOAD_IMAGE,
            _numpy_pool("1"),
            cpus=2.0,
            description="the numpy 1.26.4 Pool with 1 BLAS thread per worker, in a container with --cpus 2",
        ),
    )
}


def ensure_workload_image() -> None:
    """Build the numpy workload image once (scripts/build-image.sh; pip inside the build)."""
    if subprocess.run(["podman", "image", "exists", WORKLOAD_IMAGE]).returncode == 0:
        return
    result = subprocess.run(
        [str(REPO / "scripts" / "build-image.sh"), WORKLOAD_IMAGE, str(REPO / "tests" / "workloads" / "Containerfile")],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"cannot build {WORKLOAD_IMAGE}: {result.stdout[-1500:]}{result.stderr[-1500:]}")


@contextmanager
def container_running(scenario: ContainerScenario, seconds: float) -> Iterator[str]:
    """The scenario's container, started for *seconds*; yields its id; removed on exit."""
    podman = Podman()  # the base image and Podman's API socket, as the container tests set them up
    name = f"{podman.prefix}-{scenario.name}"
    try:
        for workload in (
            "hogs",
            "file_reader",
        ):  # the debian image runs the C workloads mounted from tests/.build at /w
            build(workload)
        data_file(192)
        ensure_workload_image()
        result = subprocess.run(
            [
                "podman",
                "run",
                "-d",
                "--name",
                name,
                "--cpus",
                f"{scenario.cpus:g}",
                *(["--memory", str(scenario.memory)] if scenario.memory is not None else []),
                "-v",
                f"{BUILD}:/w:ro",
                scenario.image,
                *scenario.argv(seconds),
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"podman run {scenario.name} failed: {result.stderr.strip()[-1000:]}")
        yield result.stdout.strip()
    finally:
        podman.remove(name)
        podman.close()
