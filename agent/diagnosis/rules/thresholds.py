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
    # Without a clock (a saved perf trace -s): a thread that yielded this many times, or spent this long in
    # sched_yield, was spinning. perf trace slows the loop ~30x: numpy 1.26 pool threads traced here made 2,500-87,000
    # calls each but spent 0.9-3.4 s in them over 4 s; the seed's bare-metal hand-off thread 4.0 s, its main 0.13 s.
    yields_per_thread: int = 100_000
    yield_seconds_per_thread: float = 0.5
    # At least this many spinning threads make a pool storm (one thread handing work over is not one).
    storm_threads: int = 2
    # Threads waiting for a CPU: seconds of run-queue wait per second, per CPU the workload may use.
    runqueue_wait_per_cpu: float = 0.25
    # Saturation: threads wanting a CPU on average (CPU used + run-queue wait per second) per CPU it may use. 4 CPU
    # hogs on 2 CPUs want 4 CPUs (2.0 per CPU) however busy the node; the fixed 4-worker numpy pool, whose workers
    # also wait for their parent, measured 1.25-1.45 per CPU on a loaded machine.
    wanted_per_cpu: float = 1.6
    # ... and it must hold at least this share of its CPUs: workers that wait mostly behind other workloads of a
    # loaded node (a fixed pool recorded at 28 % busy, 3.4 threads wanting 2 CPUs) are not saturating it
    # themselves; 4 hogs on a full node still held 58 %.
    busy_share: float = 0.5
    # Futex hand-offs of a pool: futex calls per second per CPU.
    futex_handoffs_per_cpu: float = 1_000.0
    # A lock convoy: futex waits per second, wakes per wait, share of its threads blocked on average (a convoy of
    # 4 threads measured 930-960 waits/s and 2.8 of 5 threads blocked; a healthy 4-worker pool 390 waits/s and 2.3
    # of 8 blocked).
    convoy_waits_per_second: float = 100.0
    convoy_wakes_per_wait: float = 0.3
    convoy_blocked_share: float = 0.4
    convoy_blocked_threads: float = 0.5  # when the thread count is unknown
    # Throttling: share of CFS periods throttled, and at least this many periods seen.
    throttled_share: float = 0.2
    throttled_min_periods: int = 10
    # Node observations (percent of the node's CPU time).
    system_percent: float = 20.0
    steal_percent: float = 10.0
    softirq_percent: float = 10.0
    iowait_percent: float = 20.0


DEFAULT = Thresholds()
