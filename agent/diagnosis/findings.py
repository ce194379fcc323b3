"""What the rules conclude: findings (a cause, with evidence and a fix), rules that could not check, and
observations that explain time schedwatch does not measure. Plain data; renderers draw it, rules make it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from agent.diagnosis.facts import Facts, Workload

SCHEMA = "schedwatch.diagnosis/v1"  # the JSON contract's name and version (docs/diagnosis.md)


class Cause(str, Enum):
    """Stable cause ids: alerts, dashboards and people's scripts key on them."""

    THREAD_POOL_OVERSUBSCRIPTION = "thread-pool-oversubscription"
    FUTEX_CONTENTION = "futex-contention"
    RUN_QUEUE_SATURATION = "run-queue-saturation"
    CPU_THROTTLING = "cpu-throttling"


class Mechanism(str, Enum):
    """How the threads lose their time."""

    YIELD_STORM = "yield-storm"  # idle pool threads spin calling sched_yield
    USER_SPACE_SPIN = "user-space-spin"  # idle pool threads spin in user space, taking CPUs from working ones
    FUTEX_HANDOFF = "futex-handoff"  # pool threads park and wake on futexes for every chunk of work
    LOCK_CONVOY = "lock-convoy"  # threads queue on one lock: each waits for the one holding it
    TOO_MANY_RUNNABLE = "too-many-runnable"  # more runnable threads than CPUs, no pool involved
    QUOTA = "quota"  # the CFS quota stops the workload's threads in most periods


class Confidence(str, Enum):
    """How sure: high when every fact the rule wants was there and agrees; lower when facts are missing."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True)
class Evidence:
    """One number behind a finding, and what it was compared with."""

    fact: str  # e.g. "sched_yield calls per second per CPU"
    value: float
    unit: str  # e.g. "/s per CPU", "threads", "%"
    compared_with: str  # e.g. "a healthy workload: below 1,000" or "CPUs it may use: 2"


@dataclass(frozen=True)
class Fix:
    """What to change, in words a data scientist can apply, with the numbers filled in."""

    summary: str
    steps: tuple[str, ...]
    variables: dict[str, str] = field(default_factory=dict)  # environment variables to set: name -> value
    threads_per_process: int | None = None


@dataclass(frozen=True)
class Finding:
    """A cause named for one workload."""

    cause: Cause
    mechanism: Mechanism
    workload: Workload
    processes: tuple[int, ...]
    libraries: tuple[str, ...]  # "openblas 0.3.23.dev", "libgomp 1.0.0"
    evidence: tuple[Evidence, ...]
    confidence: Confidence
    fix: Fix
    explanation: str  # the mechanism in two sentences, for a person
    collect_next: tuple[str, ...] = ()  # what would raise the confidence


@dataclass(frozen=True)
class Unchecked:
    """A rule that could not decide for a workload, because facts were missing."""

    rule: Cause
    workload: Workload
    missing: tuple[str, ...]  # facts the rule wanted
    collect_next: tuple[str, ...]  # how to get them


@dataclass(frozen=True)
class Observation:
    """Something the facts show that is not a thread-contention cause schedwatch measures, and where to look."""

    topic: str  # stable id, e.g. "high-system-time-unexplained", "steal"
    summary: str
    evidence: tuple[Evidence, ...]
    look_next: tuple[str, ...]
    workload: Workload | None = None


@dataclass(frozen=True)
class Diagnosis:
    """One diagnosis: the facts and what the rules made of them."""

    facts: Facts
    findings: tuple[Finding, ...]
    unchecked: tuple[Unchecked, ...]
    observations: tuple[Observation, ...]

    @property
    def healthy(self) -> bool:
        """No finding at all."""
        return not self.findings
