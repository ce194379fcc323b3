"""What the rules read: one shape for facts however they were gathered.

``schedwatch diagnose`` fills these views from BPF counters and /proc, ``analyze`` from saved ``perf trace -s``,
``strace -c`` or ``top`` output, ``compare`` from two of either. A rule never knows which. Any fact a source
cannot give is None (never 0): a rule that needs it answers "could not check", and the report says what to
collect to know it.

Counts cover the view's window (*seconds*). A saved artifact may not say how long it covers: then *seconds* is
None and rules judge counts and shares of time rather than rates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agent.identity.workload import Workload as Workload  # which workload: the metrics' labels


@dataclass(frozen=True)
class CpuShares:
    """Where a node's CPU time went, in percent (as top's %Cpu line, mpstat or /proc/stat give it)."""

    user: float | None = None
    nice: float | None = None
    system: float | None = None
    idle: float | None = None
    iowait: float | None = None
    irq: float | None = None
    softirq: float | None = None
    steal: float | None = None
    since_boot: bool = False  # the shares average the machine's life since boot (one reading of /proc/stat)


@dataclass(frozen=True)
class ReclaimCounts:
    """Page reclaim and compaction as ``/proc/vmstat`` counts them: since boot (one reading), or between two.

    Pages scanned and reclaimed (stolen) by kswapd in the background and by allocating tasks themselves (direct
    reclaim, which stalls them), allocations that stalled in direct reclaim (``allocstall``) and in compaction. A
    counter the kernel does not print is None.
    """

    since_boot: bool  # one reading: counts since the machine booted; two: what happened between them
    scanned_kswapd: float | None = None
    scanned_direct: float | None = None
    stolen_kswapd: float | None = None
    stolen_direct: float | None = None
    allocation_stalls: float | None = None
    compaction_stalls: float | None = None
    compaction_failures: float | None = None


@dataclass(frozen=True)
class SoftirqCounts:
    """Soft interrupts per type and CPU as ``/proc/softirqs`` counts them: since boot, or between two readings."""

    since_boot: bool
    by_type: dict[str, tuple[float, ...]]  # NET_RX, TIMER, ...: one count per CPU, CPU0 first


@dataclass(frozen=True)
class WaitHistogram:
    """How long each of many waits (or runs) lasted, as a tool's log2 histogram: ``(from, to, count)`` rows, in
    seconds; what was measured (run-queue wait, on-CPU or off-CPU time) is the field holding it."""

    buckets: tuple[tuple[float, float, float], ...]
    scope: str  # "machine", or "process" / "thread" when the tool measured one (runqlat -p, -P, -L)
    window_seconds: float | None = None  # how long it measured, where the paste tells (an interval's banner)

    @property
    def count(self) -> float:
        """How many waits."""
        return sum(count for _low, _high, count in self.buckets)

    def share_at_least(self, seconds: float) -> float | None:
        """The share of the waits in buckets that start at *seconds* or later; None without waits."""
        total = self.count
        if total <= 0:
            return None
        return sum(count for low, _high, count in self.buckets if low >= seconds) / total

    @property
    def seconds(self) -> float:
        """The time the waits add up to, each counted at its bucket's middle (a log2 bucket's error is below 1.5x)."""
        return sum(count * (low + high) / 2 for low, high, count in self.buckets)


@dataclass(frozen=True)
class TaskDelay:
    """One task (or tasks of one name) as a scheduler trace summarises it (``perf sched latency``/``timehist``)."""

    name: str
    pid: int | None  # None: several tasks of this name added up
    runtime_seconds: float
    switches: int | None  # times it was switched in (each a wait for a CPU, however short)
    average_delay_seconds: float | None  # from waking to running, on average
    max_delay_seconds: float | None


@dataclass(frozen=True)
class NodeView:
    """The node as a whole."""

    cpus: int | None = None  # online CPUs
    cpu: CpuShares | None = None
    run_queue: float | None = None  # runnable tasks on average (vmstat's r, top's running tasks)
    load_average: tuple[float, float, float] | None = None
    context_switches_per_second: float | None = None
    clocksource: str | None = None  # /sys/devices/system/clocksource/clocksource0/current_clocksource
    available_clocksources: tuple[str, ...] | None = None
    clocksource_events: tuple[str, ...] = ()  # kernel log lines about the clock source (TSC marked unstable, ...)
    pressure_waiting_seconds: dict[str, float] | None = None  # /proc/pressure/{cpu,memory,io} "some" totals
    pressure_stalled_seconds: dict[str, float] | None = None  # "full" totals
    reclaim: ReclaimCounts | None = None  # /proc/vmstat
    softirqs: SoftirqCounts | None = None  # /proc/softirqs
    interrupts: SoftirqCounts | None = None  # /proc/interrupts: hardware interrupts per source (its name) and CPU
    runqueue_waits: WaitHistogram | None = None  # every task's run-queue waits (runqlat, perf sched, bpftrace)
    cpu_holders: tuple[tuple[str, float], ...] | None = None  # tasks and the CPU seconds they ran, busiest first
    task_delays: tuple[TaskDelay, ...] | None = None  # each task's run time and waits (perf sched), busiest first


@dataclass(frozen=True)
class CodeShare:
    """Where a workload's sampled CPU time, or its calls of one system call, went: one library and function.

    *library* is a file name without the hash suffix a wheel adds (``libscipy_openblas64_.so``), ``[kernel]`` for
    kernel code, ``(unknown)`` for an address no mapping explains; *function* is None when the address has no
    symbol. *count* is samples (on-CPU) or calls (call sites) in the window.
    """

    library: str
    function: str | None
    mode: str  # "user" or "kernel"
    count: float
    version: str | None = None  # the library's own version, where it says
    inclusive: float | None = None  # count with its callees' (perf report --children); None: not told


def by_library(rows: Iterable[CodeShare]) -> dict[str, list[CodeShare]]:
    """*rows* grouped by their library, libraries and rows in the order met."""
    grouped: dict[str, list[CodeShare]] = {}
    for row in rows:
        grouped.setdefault(row.library, []).append(row)
    return grouped


@dataclass(frozen=True)
class StackGroup:
    """Stacks that stand in one kind of code (their leaf) under one owner, as the stack classifier sorted them.

    *leaf*: ``yield`` (sched_yield), ``spin`` (a spin or pause loop in user space), ``lock`` (a mutex or lock wait
    on a futex), ``futex`` (a condition, semaphore or join: waiting for a signal), ``allocator-lock`` (inside an
    allocator's lock), ``io``, ``sleep``, ``page-fault``, ``reclaim``, ``idle`` or ``running``. *owner*: ``pool``
    (a thread-pool library's code, diagnosis.pools), ``allocator`` (diagnosis.allocators), ``program`` (the
    program's own code), ``runtime`` (an interpreter or the C++ runtime), ``kernel``, ``unknown`` (no symbol);
    *library* and *function*: the owning frame; *implementation*: the pool's or allocator's row.
    """

    leaf: str
    owner: str
    library: str
    function: str | None
    implementation: str | None
    weight: float  # stacks (a dump: one per thread) or samples or calls, as StackEvidence.unit says
    threads: int | None = None  # distinct threads among them, where the source tells


@dataclass(frozen=True)
class StackEvidence:
    """Every stack a source gave, sorted by the stack classifier into groups (busiest first)."""

    unit: str  # "threads" (a dump: one moment), "samples" (a profile), "calls" (a traced call), "off-CPU seconds"
    total: float  # the weight of every stack
    threads: int | None  # distinct threads the stacks came from, where told
    groups: tuple[StackGroup, ...]


@dataclass(frozen=True)
class ThreadView:
    """One thread (or, where a tool only tells processes, one process) and what it did in the window."""

    tid: int | None
    comm: str | None
    pid: int | None = None  # its process, when known
    sched_yield_calls: int | None = None
    sched_yield_seconds: float | None = None  # time spent in the call (perf trace, strace)
    futex_calls: int | None = None
    futex_seconds: float | None = None  # time spent in futex calls: mostly waiting
    futex_max_seconds: float | None = None  # the longest single futex call
    syscall_seconds: float | None = None  # time in every system call together
    cpu_percent: float | None = None  # of one CPU
    system_percent: float | None = None
    voluntary_switches_per_second: float | None = None  # times it left the CPU to sleep or wait, per second


@dataclass(frozen=True)
class LibraryView:
    """A thread-pool library mapped by processes of the workload."""

    api: str  # blas, openmp, tbb, torch
    implementation: str  # openblas, mkl, libgomp, libomp, libiomp5, tbb, torch, ...
    version: str | None
    pids: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProcessView:
    """One process of a workload."""

    pid: int
    ppid: int | None = None
    comm: str | None = None
    command: str | None = None  # exe basename, or comm
    threads: int | None = None
    cpu_percent: float | None = None  # of one CPU: 250 = two and a half CPUs busy
    system_percent: float | None = None
    affinity: tuple[int, ...] = ()  # CPUs it may run on; empty when unknown
    libraries: tuple[str, ...] = ()  # implementations mapped (LibraryView.implementation)
    environment: tuple[tuple[str, str], ...] | None = None  # allow-listed variables set; None: not readable
    children_cpu_percent: float | None = None  # CPU of the children it reaped meanwhile, of one CPU: it spawns


@dataclass(frozen=True)
class PoolView:
    """Pool workers: several processes of one command under one parent."""

    parent_pid: int
    command: str
    pids: tuple[int, ...]

    @property
    def size(self) -> int:
        """How many workers."""
        return len(self.pids)


@dataclass(frozen=True)
class WorkloadView:
    """One workload over the window: counts, CPU, limits, and (when it was looked at closely) its processes."""

    ref: Workload
    seconds: float | None = None  # length of the window; None when the source does not tell
    cpus_allowed: float | None = None  # CPUs it may use: its CPU limit, its affinity, or the node's CPUs
    cpu_limit_cores: float | None = None  # None: no limit set, or not known
    cpu_used_cores: float | None = None  # user + system CPU over the window, in CPUs
    system_share: float | None = None  # system / (user + system), 0..1
    threads: int | None = None
    sched_yield_calls: float | None = None
    futex_calls: dict[str, float] | None = None  # by operation: wait, wake, requeue, lock_pi, waitv, other
    futex_wait_seconds: float | None = None  # summed over threads
    runqueue_wait_seconds: float | None = None  # summed over threads: runnable, waiting for a CPU
    preempted_seconds: float | None = None  # off CPU because preempted, summed over threads
    throttled_periods: float | None = None
    periods: float | None = None
    throttled_seconds: float | None = None
    processes: tuple[ProcessView, ...] | None = None  # None: not looked at closely
    pool_workers: int | None = None  # pool workers counted on the node (metrics.POOL_WORKERS); None: not counted
    pools: tuple[PoolView, ...] | None = None
    libraries: tuple[LibraryView, ...] | None = None  # None: maps not read
    thread_views: tuple[ThreadView, ...] | None = None  # per thread, where the source tells it
    syscall_seconds: dict[str, float] | None = None  # time in each system call, all threads (perf trace, strace)
    # The time budget (agent/machine/syscall_families.py names the families):
    user_seconds: float | None = None  # CPU time in user space, thread-seconds
    system_seconds: float | None = None  # CPU time in the kernel, thread-seconds
    syscall_calls_by_family: dict[str, float] | None = None  # calls per family
    syscall_seconds_by_family: dict[str, float] | None = None  # time inside the calls per family
    waiting_by_holder: dict[str, float] | None = None  # wait for a CPU by who held it: self, other, kernel
    neighbours: tuple[tuple[str, float], ...] | None = None  # (workload, seconds it held a CPU this one waited for)
    blocked_by_kind: dict[str, float] | None = None  # off CPU by what it waited on: futex, io, sleep
    voluntary_switches: float | None = None
    involuntary_switches: float | None = None
    page_faults: float | None = None  # minor and major
    major_page_faults: float | None = None
    processes_exited: float | None = None  # processes whose last thread exited (threads alone are not counted)
    pressure_waiting_seconds: dict[str, float] | None = None  # cgroup2 {cpu,memory,io}.pressure "some" totals
    pressure_stalled_seconds: dict[str, float] | None = None  # "full" totals
    memory_events: dict[str, float] | None = None  # cgroup memory.events: high, max, oom, oom_kill
    memory_limit_bytes: float | None = None  # the memory limit that applies; None: none, or not known
    memory_refaults: float | None = None  # pages reclaimed from it and faulted back in
    # Code attribution: on-CPU samples and call sites, busiest first.
    cpu_samples: tuple[CodeShare, ...] | None = None
    cpu_samples_total: float | None = None  # every on-CPU sample of the window (a profile may list only its top)
    yield_sites: tuple[CodeShare, ...] | None = None
    futex_sites: tuple[CodeShare, ...] | None = None
    stacks: StackEvidence | None = None  # its stacks by leaf and owner (the stack classifier)
    runqueue_waits: WaitHistogram | None = None  # its own run-queue waits, each (runqlat -p, -P, perf sched)
    oncpu_slices: WaitHistogram | None = None  # how long it ran each time it got a CPU (cpudist)
    offcpu_slices: WaitHistogram | None = None  # how long it was off a CPU each time (cpudist -O)

    def rate(self, count: float | None) -> float | None:
        """*count* per second of the window; None when either is unknown."""
        if count is None or not self.seconds:
            return None
        return count / self.seconds

    @property
    def futex_total(self) -> float | None:
        """Futex calls of every operation."""
        return None if self.futex_calls is None else sum(self.futex_calls.values())


@dataclass(frozen=True)
class Facts:
    """Everything one diagnosis is made from: the node, its workloads, and where the facts came from."""

    node: NodeView
    workloads: tuple[WorkloadView, ...]
    sources: tuple[str, ...] = ()  # e.g. "bpf", "agent http://127.0.0.1:17953", "perf trace -s gcp.txt"
    notes: tuple[str, ...] = field(default_factory=tuple)  # what a source could not give (said in the report)
