"""The scenarios: what runs, where (CPU quota, container or not), and what a diagnosis should name.

Each scenario is one command started in a fresh cgroup for a bounded time. A sick scenario expects exactly one
(cause, mechanism); a healthy one expects no finding at all.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.workloads import BUILD, SOURCES, build

HERE = Path(__file__).resolve().parent
PIP_INSTALL = (sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target")
NUMPY_VERSIONS = {"1.26": "1.26.4", "2": "2.4.6"}  # 1.26.4: OpenBLAS 0.3.23 with pthreads (yields); 2.4.6: spins
WORKERS = 4  # pool workers of the numpy scenarios, as in the issue


@dataclass(frozen=True)
class Expected:
    """What a diagnosis should find on a scenario: one cause and mechanism, or nothing."""

    cause: str | None
    mechanism: str | None = None
    also_true: frozenset[str] = frozenset()  # causes that are true too here: not required, not counted as false

    def __str__(self) -> str:
        if self.cause is None:
            return "no finding"
        named = self.cause if self.mechanism is None else f"{self.cause}/{self.mechanism}"
        return named + "".join(f" (+ {cause} allowed)" for cause in sorted(self.also_true))


HEALTHY = Expected(None)


@dataclass(frozen=True)
class Scenario:
    """A workload to run for a bounded time: ``argv(seconds)`` with ``environment()`` added, in a cgroup with
    ``quota`` cores (None: unlimited)."""

    name: str
    expected: Expected
    argv: Callable[[float], list[str]]
    environment: Callable[[], dict[str, str]] = dict
    quota: float | None = None
    description: str = ""
    tags: frozenset[str] = field(default_factory=frozenset)


def numpy_target(series: str) -> Path:
    """numpy of *series* ("1.26" or "2") and threadpoolctl, pip-installed once into tests/.build (~20 s)."""
    version = NUMPY_VERSIONS[series]
    target = BUILD / f"numpy-{version}"
    if not target.exists():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        BUILD.mkdir(exist_ok=True)
        subprocess.run([*PIP_INSTALL, str(partial), f"numpy=={version}", "threadpoolctl>=3"], check=True)
        partial.rename(target)  # only a complete install is ever found
    return target


def numpy_pool(
    series: str, threads: str, workers: int = WORKERS
) -> tuple[Callable[[float], list[str]], Callable[[], dict[str, str]]]:
    """tests/workloads/numpy_pool.py with *workers* workers and BLAS *threads* ("unset" or a number) per worker."""

    def argv(seconds: float) -> list[str]:
        return [sys.executable, str(SOURCES / "numpy_pool.py"), "-", str(workers), threads, f"{seconds:g}s", "0"]

    def environment() -> dict[str, str]:
        return {"PYTHONPATH": str(numpy_target(series))}

    return argv, environment


def compiled(name: str, *args: str, flags: tuple[str, ...] = ()) -> Callable[[float], list[str]]:
    """A C workload of tests/workloads run as NAME - ARGS, where "{s}" in an argument is the duration."""

    def argv(seconds: float) -> list[str]:
        return [str(build(name, *flags)), "-", *(a.format(s=f"{seconds:g}") for a in args)]

    return argv


def python_script(path: Path, *args: str) -> Callable[[float], list[str]]:
    def argv(seconds: float) -> list[str]:
        return [sys.executable, str(path), *(a.format(s=f"{seconds:g}") for a in args)]

    return argv


def fixed_threads(count: int = 1) -> Callable[[], dict[str, str]]:
    return lambda: {"OMP_NUM_THREADS": str(count)}


OPENMP = ("-fopenmp",)
POOL = "thread-pool-oversubscription"

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "numpy126-pool",
        Expected(POOL, "yield-storm"),
        *numpy_pool("1.26", "unset"),
        description="numpy 1.26.4 (OpenBLAS 0.3.23, pthreads) in a 4-worker Pool, BLAS threads unset",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "numpy2-pool",
        Expected(POOL, "user-space-spin"),
        *numpy_pool("2", "unset"),
        description="numpy 2.4.6 (OpenBLAS 0.3.31, spins in user space) in a 4-worker Pool, BLAS threads unset",
    ),
    Scenario(
        "openmp-procs",
        Expected(POOL, "user-space-spin"),
        compiled("omp_procs", "2", "{s}s", flags=OPENMP),
        description="2 processes of a libgomp program alternating parallel loops and serial parts, default threads",
    ),
    Scenario(
        "openmp-procs-limited",
        Expected(POOL, "user-space-spin", also_true=frozenset({"cpu-throttling"})),  # 27-55 % of periods throttled
        compiled("omp_procs", "2", "{s}s", flags=OPENMP),
        quota=1.0,
        description="the same 2 libgomp processes, default threads, under a quota of 1 CPU",
    ),
    Scenario(
        "lock-convoy",
        Expected("futex-contention"),
        compiled("lock_convoy", "4", "{s}", "1000", "100"),
        description="4 threads taking one pthread mutex, 1 ms of CPU inside, 0.1 ms asleep outside",
    ),
    Scenario(
        "cpu-hogs",
        Expected("run-queue-saturation"),
        compiled("hogs", "4", "{s}"),
        description="4 CPU-bound single-threaded processes on 2 CPUs, no pool library",
    ),
    Scenario(
        "throttled",
        Expected("cpu-throttling"),
        compiled("hogs", "1", "{s}"),
        quota=0.5,
        description="1 CPU-bound process under a quota of 0.5 CPU",
    ),
    Scenario(
        "healthy-numpy126-pool",
        HEALTHY,
        *numpy_pool("1.26", "1"),
        description="the numpy 1.26.4 Pool with 1 BLAS thread per worker (the fix)",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "healthy-numpy126-pool2",
        HEALTHY,
        *numpy_pool("1.26", "1", workers=2),
        description="the numpy 1.26.4 Pool with 2 workers (one per CPU) and 1 BLAS thread each",
    ),
    Scenario(
        "healthy-numpy2-pool",
        HEALTHY,
        *numpy_pool("2", "1"),
        description="the numpy 2.4.6 Pool with 1 BLAS thread per worker (the fix)",
    ),
    Scenario(
        "healthy-openmp-procs",
        HEALTHY,
        compiled("omp_procs", "2", "{s}s", flags=OPENMP),
        fixed_threads(1),
        description="the 2 libgomp processes with OMP_NUM_THREADS=1 (the fix)",
    ),
    Scenario(
        "healthy-openmp-limited",
        HEALTHY,
        compiled("omp_procs", "1", "{s}s", flags=OPENMP),
        fixed_threads(1),
        quota=1.5,
        description="1 libgomp process with OMP_NUM_THREADS=1 under a quota of 1.5 CPUs (quota above use)",
    ),
    Scenario(
        "healthy-lock",
        HEALTHY,
        compiled("lock_convoy", "4", "{s}", "20", "1000"),
        description="the 4 threads with 20 us critical sections and 1 ms asleep outside",
    ),
    Scenario(
        "healthy-hog",
        HEALTHY,
        compiled("hogs", "1", "{s}"),
        description="1 CPU-bound process on 2 CPUs",
    ),
    Scenario(
        "healthy-quota",
        HEALTHY,
        compiled("hogs", "1", "{s}"),
        quota=1.5,
        description="1 CPU-bound process under a quota of 1.5 CPUs (quota above use)",
    ),
    Scenario(
        "sleeper",
        HEALTHY,
        lambda seconds: [str(build("sleeper")), "-", str(int(seconds * 10)), "100000000", "0"],
        description="one thread sleeping 100 ms at a time",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "request-server",
        HEALTHY,
        python_script(HERE / "workloads" / "request_server.py", "{s}", "100"),
        description="a threaded TCP server on 127.0.0.1 answering 100 small requests per second",
    ),
)

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
