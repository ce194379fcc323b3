"""The numbers the rules compare facts with, in one place, each with where it comes from.

Measured on scenario workloads (docs/diagnosis.md has the table): a healthy workload yields almost never, a BLAS
pool storm yields hundreds of thousands of times a second per CPU.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """Where healthy ends. Rates are per second of the window; "per CPU" is per CPU the workload may use."""

    # A yield storm: healthy workloads measured below 100/s per CPU; OpenBLAS 0.3.23 pools in 4 workers on 2 CPUs
    # ~390,000/s per CPU; the seed case ~400,000/s per CPU.
    yields_per_cpu: float = 2_000.0
    # Without a clock (a saved perf trace -s): a thread that yielded this many times was spinning.
    yields_per_thread: int = 100_000
    # At least this many spinning threads make a pool storm (one thread handing work over is not one).
    storm_threads: int = 2
    # Threads waiting for a CPU: seconds of run-queue wait per second, per CPU the workload may use.
    runqueue_wait_per_cpu: float = 0.25
    # Busy: CPU used / CPUs it may use.
    busy_share: float = 0.8
    # Futex hand-offs of a pool: futex calls per second per CPU.
    futex_handoffs_per_cpu: float = 1_000.0
    # A lock convoy: futex waits per second, threads blocked on average, wakes per wait.
    convoy_waits_per_second: float = 100.0
    convoy_blocked_threads: float = 0.5
    convoy_wakes_per_wait: float = 0.3
    # Throttling: share of CFS periods throttled, and at least this many periods seen.
    throttled_share: float = 0.2
    throttled_min_periods: int = 10
    # Node observations (percent of the node's CPU time).
    system_percent: float = 20.0
    steal_percent: float = 10.0
    softirq_percent: float = 10.0
    iowait_percent: float = 20.0


DEFAULT = Thresholds()
