"""What a scenario looks like to the agent and to its cgroup over a window: rates from /metrics and cgroup deltas."""

from __future__ import annotations

import time
import urllib.request
from dataclasses import asdict, astuple, dataclass

from tests.scenarios.live import CpuUse, ScenarioCgroup, Throttling
from tests.support.agent import AgentProcess
from tests.support.scrape import Scrape

FUTEX_OPS = ("wait", "wake", "requeue", "lock_pi", "waitv", "other")
RUNQ = "schedwatch_runqueue_latency_seconds"
MAX_SCRAPE_SECONDS = 5.0


@dataclass(frozen=True)
class Window:
    """Per-second rates of one scenario over one window (per allowed CPU where the name says so)."""

    seconds: float
    cpus_allowed: float
    threads: float
    yields_per_cpu: float
    futex_per_s: dict[str, float]
    futex_wait: float
    runq_wait_per_cpu: float
    runq_waits_per_s: float
    preempted: float
    blocked: float
    cpu_cores: float
    system_share: float
    throttled_ratio: float | None
    throttled_seconds: float
    scrape_seconds: float  # the longer of the two scrapes: the window's edges are this uncertain

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Point:
    """Everything read at one instant."""

    at: float
    scrape: Scrape
    cpu: CpuUse
    throttling: Throttling
    scrape_seconds: float


def point(agent: AgentProcess, group: ScenarioCgroup) -> Point:
    """A scrape, with the cgroup files read just before and just after it and taken at the middle: on a busy
    machine (thousands of other cgroups) a scrape takes seconds, and the agent reads its maps somewhere inside."""
    cpu_before, throttling_before, started = group.cpu_use(), group.throttling(), time.monotonic()
    scraped = scrape_of(agent, group.label)
    ended = time.monotonic()
    cpu_after, throttling_after = group.cpu_use(), group.throttling()
    if ended - started > MAX_SCRAPE_SECONDS:
        raise RuntimeError(f"a scrape took {ended - started:.1f} s: the machine is too busy to calibrate")
    cpu = CpuUse(*((a + b) / 2 for a, b in zip(astuple(cpu_before), astuple(cpu_after), strict=True)))
    throttling = Throttling(
        *((a + b) / 2 for a, b in zip(astuple(throttling_before), astuple(throttling_after), strict=True))
    )
    return Point((started + ended) / 2, scraped, cpu, throttling, ended - started)


def scrape_of(agent: AgentProcess, label: str) -> Scrape:
    """One scrape, parsed only for the lines of the cgroup *label*: with thousands of other cgroups on the machine
    parsing all of it would take seconds."""
    with urllib.request.urlopen(agent.url, timeout=30) as response:
        text = response.read().decode()
    wanted = f'cgroup="{label}"'
    return Scrape("\n".join(line for line in text.splitlines() if wanted in line) + "\n")


def series(scrape: Scrape, name: str, label: str, **labels: str) -> float:
    """The one sample of *name* for the cgroup *label*: it must exist (a missing series is not a zero)."""
    found = scrape.value(name, cgroup=label, container_id="", **labels)
    if found is None:
        raise AssertionError(f"the agent exports no {name}{labels} for {label}")
    return found


def syscall_count(scrape: Scrape, name: str, label: str, **labels: str) -> float:
    """A syscall counter of a cgroup this run made empty: the agent keeps a row only once the cgroup made a yield or
    futex call, so until then its count is 0 by construction. The sched series (every task is scheduled) must
    be there, or the agent does not know the cgroup at all."""
    series(scrape, f"{RUNQ}_count", label)
    found = scrape.value(name, cgroup=label, container_id="", **labels)
    return 0.0 if found is None else found


def window(before: Point, after: Point, label: str) -> Window:
    """Rates between two points of the cgroup *label*."""
    seconds = after.at - before.at

    def rate(name: str, **labels: str) -> float:
        read = syscall_count if "futex" in name or "yield" in name else series
        return (read(after.scrape, name, label, **labels) - read(before.scrape, name, label, **labels)) / seconds

    cpus = series(after.scrape, "schedwatch_cpu_limit_cores", label)
    used = after.cpu.total - before.cpu.total
    user = after.cpu.user - before.cpu.user
    system = after.cpu.system - before.cpu.system
    periods = after.throttling.periods - before.throttling.periods
    throttled = after.throttling.throttled - before.throttling.throttled
    return Window(
        seconds=seconds,
        cpus_allowed=cpus,
        threads=series(after.scrape, "schedwatch_threads", label),
        yields_per_cpu=rate("schedwatch_sched_yield_calls_total") / cpus,
        futex_per_s={op: rate("schedwatch_futex_calls_total", op=op) for op in FUTEX_OPS},
        futex_wait=rate("schedwatch_futex_wait_seconds_total"),
        runq_wait_per_cpu=rate(f"{RUNQ}_sum") / cpus,
        runq_waits_per_s=rate(f"{RUNQ}_count"),
        preempted=rate("schedwatch_offcpu_seconds_total", reason="preempted"),
        blocked=rate("schedwatch_offcpu_seconds_total", reason="blocked"),
        cpu_cores=used / seconds,
        system_share=system / (user + system) if user + system > 0 else 0.0,
        throttled_ratio=throttled / periods if periods else None,
        throttled_seconds=(after.throttling.seconds - before.throttling.seconds) / seconds,
        scrape_seconds=max(before.scrape_seconds, after.scrape_seconds),
    )
