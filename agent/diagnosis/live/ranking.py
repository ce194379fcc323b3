"""Which workloads show contention, and how much: each signal divided by the rate the alerts fire at.

The score of a workload is its highest signal over that signal's alert threshold (deploy/prometheus/alerts.yaml):
1 means at an alert threshold. A workload is looked at closely (its processes, maps and thread variables read)
when its score reaches FLAG_SCORE, a bar far below the alerts, so that a diagnosis sees what is building up.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.diagnosis.views import WorkloadView

YIELDS_PER_CPU = 10_000.0  # sched_yield/s per CPU: SchedwatchYieldStorm
FUTEX_PER_CPU = 20_000.0  # futex calls/s per CPU: SchedwatchFutexStorm
WAITING_PER_CPU = 1.0  # threads waiting for a CPU, per CPU: SchedwatchCPUOversubscribed
THROTTLED_SHARE = 0.25  # throttled periods / periods: SchedwatchCPUThrottled
BUSY_SHARE = 1.0  # CPU used / CPUs allowed: a workload using all it may
FLAG_SCORE = 0.05  # e.g. 500 yields/s per CPU, 5 % of periods throttled, 0.05 threads waiting per CPU
MAX_FLAGGED = 8  # workloads read closely at most, highest scores first


@dataclass(frozen=True)
class Signals:
    """A workload's contention signals, each as a share of its alert threshold."""

    yields: float = 0.0
    futex: float = 0.0
    waiting: float = 0.0
    throttled: float = 0.0
    busy: float = 0.0

    @property
    def score(self) -> float:
        """The strongest signal."""
        return max(self.yields, self.futex, self.waiting, self.throttled, self.busy)


def signals(
    seconds: float | None,
    cpus: float | None,
    yields: float | None,
    futex: float | None,
    runqueue_wait_seconds: float | None,
    throttled_periods: float | None,
    periods: float | None,
    cpu_used_cores: float | None,
) -> Signals:
    """Signals from counts over *seconds*, per CPU the workload may use."""
    if not seconds or not cpus:
        return Signals()

    def per_cpu_second(count: float | None, threshold: float) -> float:
        return 0.0 if count is None else count / seconds / cpus / threshold

    throttled = 0.0
    if throttled_periods is not None and periods:
        throttled = throttled_periods / periods / THROTTLED_SHARE
    return Signals(
        yields=per_cpu_second(yields, YIELDS_PER_CPU),
        futex=per_cpu_second(futex, FUTEX_PER_CPU),
        waiting=per_cpu_second(runqueue_wait_seconds, WAITING_PER_CPU),
        throttled=throttled,
        busy=0.0 if cpu_used_cores is None else cpu_used_cores / cpus / BUSY_SHARE * FLAG_SCORE,
    )


def workload_signals(view: WorkloadView) -> Signals:
    """The signals of a WorkloadView."""
    return signals(
        view.seconds,
        view.cpus_allowed,
        view.sched_yield_calls,
        view.futex_total,
        view.runqueue_wait_seconds,
        view.throttled_periods,
        view.periods,
        view.cpu_used_cores,
    )
