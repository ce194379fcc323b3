"""What the rules conclude: findings (a cause, with evidence and a fix), rules that could not check, and
observations that explain time schedwatch does not measure. Plain data; renderers draw it, rules make it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from agent.diagnosis.facts import Facts, Workload

SCHEMA = "schedwatch.diagnosis/v2"  # the JSON contract's name and version (docs/schemas/)


class Cause(str, Enum):
    """Stable cause ids: alerts, dashboards and people's scripts key on them."""

    THREAD_POOL_OVERSUBSCRIPTION = "thread-pool-oversubscription"
    FUTEX_CONTENTION = "futex-contention"
    RUN_QUEUE_SATURATION = "run-queue-saturation"
    CPU_THROTTLING = "cpu-throttling"
    CLOCK_READS_AS_SYSCALLS = "clock-reads-as-syscalls"
    POLLING_STORM = "polling-storm"
    PROCESS_CHURN = "process-churn"
    ALLOCATOR_CHURN = "allocator-churn"
    NOISY_NEIGHBOUR = "noisy-neighbour"
    HYPERVISOR_STEAL = "hypervisor-steal"
    MEMORY_PRESSURE = "memory-pressure"
    ALLOCATOR_CONTENTION = "allocator-contention"  # threads queue on the memory allocator's own lock
    UNEXPLAINED = "unexplained"  # the facts were there, and none of the causes above explains the time


class Mechanism(str, Enum):
    """How the threads lose their time."""

    YIELD_STORM = "yield-storm"  # idle pool threads spin calling sched_yield
    USER_SPACE_SPIN = "user-space-spin"  # idle pool threads spin in user space, taking CPUs from working ones
    FUTEX_HANDOFF = "futex-handoff"  # pool threads park and wake on futexes for every chunk of work
    LOCK_CONVOY = "lock-convoy"  # threads queue on one lock: each waits for the one holding it
    TOO_MANY_RUNNABLE = "too-many-runnable"  # more runnable threads than CPUs, no pool involved
    QUOTA = "quota"  # the CFS quota stops the workload's threads in most periods
    NO_VDSO_CLOCK_SOURCE = "no-vdso-clock-source"  # the node's clock source has no vDSO: every read is a syscall
    VDSO_BYPASSED = "vdso-bypassed"  # the clock source has a vDSO, yet the program's reads reach the kernel
    CLOCK_SYSCALLS = "clock-syscalls"  # clock reads reach the kernel; which of the two above is not known
    SHORT_SLEEPS = "short-sleeps"  # threads wake from tiny sleeps to look for work, thousands of times a second
    SHORT_POLL_TIMEOUTS = "short-poll-timeouts"  # threads poll (epoll, poll, select) with tiny or zero timeouts
    SHORT_LIVED_PROCESSES = "short-lived-processes"  # a process started (fork, exec) and ended per piece of work
    UNMAP_REFAULT = "unmap-refault"  # memory handed back to the kernel and faulted in again, over and over
    CPU_HELD_BY_NEIGHBOUR = "cpu-held-by-neighbour"  # another workload holds the CPUs its threads wait for
    STEAL = "steal"  # the hypervisor runs others on this VM's CPUs
    RECLAIM = "reclaim"  # its memory limit forces the kernel to reclaim its pages, which it then reads back
    OOM_KILLS = "oom-kills"  # its tasks are killed for want of memory
    SYSTEM_TIME = "system-time"  # much time in the kernel that no known cause explains
    ALLOCATOR_LOCK = "allocator-lock"  # threads wait in the allocator's lock (an arena's, a central free list's)
    OTHER_LOAD = "other-load"  # its threads wait long for CPUs that other tasks hold, while it uses little of them


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
    missing: tuple[str, ...] = ()  # what would give the number the fix lacks (each: the fact, and how to get it)


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
