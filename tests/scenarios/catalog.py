"""The scenarios: what runs, where (CPU quota, container or not), and what a diagnosis should name.

Each scenario is one command started in a fresh cgroup for a bounded time. A sick scenario expects exactly one
(cause, mechanism); a healthy one expects no finding at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.workloads import BUILD, SOURCES, build, build_lock

HERE = Path(__file__).resolve().parent
PIP_INSTALL = (sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target")
NUMPY_VERSIONS = {"1.26": "1.26.4", "2": "2.4.6"}  # 1.26.4: OpenBLAS 0.3.23 with pthreads (yields); 2.4.6: spins
WORKERS = 4  # pool workers of the numpy scenarios, as in the issue
PYTHON_WARM_UP = 3.0  # a Python workload's imports (numpy's) and its pool's start are done by then


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
    ``quota`` cores and ``memory_limit`` bytes (None: unlimited); ``companion(seconds)``, if any, runs beside it in a
    cgroup of its own (another workload on the node, not diagnosed)."""

    name: str
    expected: Expected
    argv: Callable[[float], list[str]]
    environment: Callable[[], dict[str, str]] = dict
    quota: float | None = None
    description: str = ""
    tags: frozenset[str] = field(default_factory=frozenset)
    memory_limit: int | None = None
    companion: Callable[[float], list[str]] | None = None
    warm_up: float = 0.0  # seconds before the diagnosis starts: a C workload is what it is from its first instruction


def numpy_target(series: str) -> Path:
    """numpy of *series* ("1.26" or "2") and threadpoolctl, pip-installed once into tests/.build (~20 s)."""
    version = NUMPY_VERSIONS[series]
    target = BUILD / f"numpy-{version}"
    if target.exists():
        return target
    with build_lock():
        if not target.exists():
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
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


def data_file(mib: int) -> Path:
    """A file of *mib* MiB of pseudo-random bytes in tests/.build (on disk, not tmpfs: its pages can be reclaimed),
    written once and synced: a dirty page stays in the page cache, charged to the writer's cgroup, whatever the
    reader's posix_fadvise(DONTNEED) asks, and a reader would then find the file cached instead of charging it."""
    target = BUILD / f"data-{mib}m.bin"
    if target.exists() and target.stat().st_size == mib << 20:
        return target
    with build_lock():
        if not target.exists() or target.stat().st_size != mib << 20:
            partial = target.with_name(target.name + ".partial")
            block = bytes(range(256)) * 4096  # 1 MiB
            with partial.open("wb") as out:
                for index in range(mib):
                    out.write(block[index % 256 :] + block[: index % 256])
                out.flush()
                os.fsync(out.fileno())
            partial.rename(target)
    return target


def reader(mib: int) -> Callable[[float], list[str]]:
    """tests/workloads/file_reader over a data file of *mib* MiB."""

    def argv(seconds: float) -> list[str]:
        return [str(build("file_reader")), "-", f"{seconds:g}", str(data_file(mib))]

    return argv


MIB = 1 << 20
NEIGHBOUR_CPU = "1"  # the CPU the noisy-neighbour scenarios share (the other one stays for the agent and the rest)


OPENMP = ("-fopenmp",)
POOL = "thread-pool-oversubscription"
CLOCK = "clock-reads-as-syscalls"
POLLING = "polling-storm"

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "numpy126-pool",
        Expected(POOL, "yield-storm"),
        *numpy_pool("1.26", "unset"),
        description="numpy 1.26.4 (OpenBLAS 0.3.23, pthreads) in a 4-worker Pool, BLAS threads unset",
        tags=frozenset({"short"}),
        warm_up=PYTHON_WARM_UP,
    ),
    Scenario(
        "numpy2-pool",
        Expected(POOL, "user-space-spin"),
        *numpy_pool("2", "unset"),
        description="numpy 2.4.6 (OpenBLAS 0.3.31, spins in user space) in a 4-worker Pool, BLAS threads unset",
        warm_up=PYTHON_WARM_UP,
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
        warm_up=PYTHON_WARM_UP,
    ),
    Scenario(
        "healthy-numpy126-pool2",
        HEALTHY,
        *numpy_pool("1.26", "1", workers=2),
        description="the numpy 1.26.4 Pool with 2 workers (one per CPU) and 1 BLAS thread each",
        warm_up=PYTHON_WARM_UP,
    ),
    Scenario(
        "healthy-numpy2-pool",
        HEALTHY,
        *numpy_pool("2", "1"),
        description="the numpy 2.4.6 Pool with 1 BLAS thread per worker (the fix)",
        warm_up=PYTHON_WARM_UP,
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
    ),
    Scenario(
        "request-server",
        HEALTHY,
        python_script(HERE / "workloads" / "request_server.py", "{s}", "100"),
        description="a threaded TCP server on 127.0.0.1 answering 100 small requests per second",
        warm_up=PYTHON_WARM_UP,
    ),
    # The other causes (issue 26): each sick workload beside a healthy twin that does the same work the right way.
    Scenario(
        "clock-syscalls",
        Expected(CLOCK, "vdso-bypassed"),
        compiled("clock_reader", "{s}", "syscall", "50"),
        description="1 thread reading the clock through syscall(2) between bits of work, as on a clock source "
        "without a vDSO (this VM's tsc has one)",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "healthy-clock-vdso",
        HEALTHY,
        compiled("clock_reader", "{s}", "vdso", "50"),
        description="the same loop reading the clock through the C library's vDSO",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "polling-short-sleeps",
        Expected(POLLING, "short-sleeps"),
        compiled("poller", "{s}", "2", "sleep", "50"),
        description="2 idle workers looking for work every 50 us with nanosleep (work comes 100 times a second)",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "polling-zero-timeout",
        Expected(POLLING, "short-poll-timeouts"),
        compiled("poller", "{s}", "2", "epoll", "0"),
        description="2 idle workers in epoll_wait with a timeout of 0 on their eventfd (work comes 100 times a second)",
    ),
    Scenario(
        "healthy-event-wait",
        HEALTHY,
        compiled("poller", "{s}", "2", "block", "0"),
        description="the 2 workers blocked on their eventfd until work comes, 100 times a second (the fix)",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "process-churn",
        Expected("process-churn", "short-lived-processes"),
        compiled("spawner", "{s}", "200", "exec"),
        description="200 requests a second, each a fork and exec of /bin/true",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "healthy-reused-worker",
        HEALTHY,
        compiled("spawner", "{s}", "200", "reuse"),
        description="the 200 requests a second handed to one helper process over a pipe (the fix)",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "allocator-churn",
        Expected("allocator-churn", "unmap-refault"),
        compiled("alloc_churn", "{s}", "1", str(64 * MIB)),
        description="a 64 MiB buffer malloc'ed, written and freed over and over: glibc maps and unmaps it each time",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "healthy-allocator-kept",
        HEALTHY,
        compiled("alloc_churn", "{s}", "1", str(64 * MIB)),
        lambda: {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(256 * MIB)},
        description="the same with MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=256 MiB: the memory is kept (the fix)",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "noisy-neighbour",
        Expected("noisy-neighbour", "cpu-held-by-neighbour"),
        compiled("duty", "{s}", "1", NEIGHBOUR_CPU, "2000", "2000"),
        companion=compiled("duty", "{s}", "2", NEIGHBOUR_CPU, "1000000", "0"),
        description="1 thread on CPU 1 computing 2 ms then sleeping 2 ms; beside it another workload's 2 CPU hogs "
        "pinned to the same CPU",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "healthy-neighbour-apart",
        HEALTHY,
        compiled("duty", "{s}", "1", NEIGHBOUR_CPU, "2000", "2000"),
        companion=compiled("duty", "{s}", "2", "0", "1000000", "0"),
        description="the same thread on CPU 1, the other workload's 2 hogs pinned to CPU 0",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "neighbour-beside-pool",
        Expected(POOL, "yield-storm"),
        *numpy_pool("1.26", "unset"),
        companion=compiled("hogs", "1", "{s}"),
        description="numpy126-pool with another workload's CPU hog on the node: the pool's own threads are its problem",
        warm_up=PYTHON_WARM_UP,
    ),
    Scenario(
        "memory-reclaim",
        Expected("memory-pressure", "reclaim"),
        reader(192),
        memory_limit=96 * MIB,
        description="a 192 MiB file read over and over under a memory limit of 96 MiB: each pass reclaims the last",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "healthy-memory-fits",
        HEALTHY,
        reader(192),
        memory_limit=512 * MIB,
        description="the same under a limit of 512 MiB: the file stays cached",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "unexplained-system-time",
        Expected("unexplained", "system-time"),
        compiled("rusage_storm", "{s}", "0"),
        description="1 thread calling getrusage(2) as fast as it can: system time none of the causes explains",
        tags=frozenset({"short"}),
    ),
    Scenario(
        "healthy-rusage-paced",
        HEALTHY,
        compiled("rusage_storm", "{s}", "1000"),
        description="the same 1,000 times a second",
        tags=frozenset({"short"}),
    ),
)

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
