"""Every metric schedwatch exports: name, type, help text and labels. The only module that names a metric."""

from __future__ import annotations

from dataclasses import dataclass

from agent.exposition.family import Family, HistogramFamily

WORKLOAD_LABELS = ("container_id", "container", "pod", "namespace", "cgroup")
PROCESS_LABELS = ("pid", "comm", *WORKLOAD_LABELS)
SELF_PROGRAM_LABELS = ("collector", "program")
SELF_MAP_LABELS = ("collector", "map")


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric family: name, help text and labels."""

    name: str
    help: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class CounterSpec(MetricSpec):
    """A counter. Names omit ``_total``; the text writer adds it."""

    def family(self) -> Family:
        """An empty family of this metric, ready for ``add_metric``."""
        return Family(self.name, self.help, "counter", self.labels)


@dataclass(frozen=True)
class GaugeSpec(MetricSpec):
    """A gauge."""

    def family(self) -> Family:
        """An empty family of this metric, ready for ``add_metric``."""
        return Family(self.name, self.help, "gauge", self.labels)


@dataclass(frozen=True)
class HistogramSpec(MetricSpec):
    """A histogram; its buckets are fixed by the probe that fills it."""

    def family(self) -> HistogramFamily:
        """An empty family of this metric, ready for ``add_metric``."""
        return HistogramFamily(self.name, self.help, self.labels)


def shown(*specs: MetricSpec) -> str:
    """The names the series of *specs* carry (a counter's ends in ``_total``), as messages and help texts name them."""
    return ", ".join(spec.name + "_total" if isinstance(spec, CounterSpec) else spec.name for spec in specs)


# --- syscalls collector: sched_yield and futex -------------------------------------------------
SCHED_YIELD_CALLS = CounterSpec(
    "schedwatch_sched_yield_calls",
    "sched_yield(2) calls made by threads of the workload, counted in the kernel.",
    WORKLOAD_LABELS,
)
FUTEX_CALLS = CounterSpec(
    "schedwatch_futex_calls",
    "futex calls by operation (wait, wake, requeue, lock_pi, waitv, other), futex2 syscalls included.",
    (*WORKLOAD_LABELS, "op"),
)
FUTEX_WAIT_SECONDS = CounterSpec(
    "schedwatch_futex_wait_seconds",
    "Time spent inside futex calls that wait (wait, waitv, lock_pi), counted when each call returns.",
    WORKLOAD_LABELS,
)
FUTEX_WAIT_DURATION = HistogramSpec(
    "schedwatch_futex_wait_duration_seconds",
    "Duration of each futex call that waits (wait, waitv, lock_pi).",
    WORKLOAD_LABELS,
)
PROCESS_SCHED_YIELD_CALLS = CounterSpec(
    "schedwatch_process_sched_yield_calls",
    "sched_yield(2) calls per live process; only the most active processes are exported.",
    PROCESS_LABELS,
)
PROCESS_FUTEX_CALLS = CounterSpec(
    "schedwatch_process_futex_calls",
    "futex calls by operation per live process; only the most active processes are exported.",
    (*PROCESS_LABELS, "op"),
)
PROCESS_FUTEX_WAIT_SECONDS = CounterSpec(
    "schedwatch_process_futex_wait_seconds",
    "Time spent inside waiting futex calls per live process; only the most active processes are exported.",
    PROCESS_LABELS,
)

# --- syscall_families collector: system calls by family (agent/machine/syscall_families.py) ----------------
SYSCALLS = CounterSpec(
    "schedwatch_syscalls",
    "System calls made by threads of the workload, by family (yield, futex, clock, sleep, poll, memory, process, "
    "file, network, other; docs/syscall-families.md lists each family's calls), counted at entry in the kernel. "
    "Exported for families with calls only.",
    (*WORKLOAD_LABELS, "family"),
)
SYSCALL_SECONDS = CounterSpec(
    "schedwatch_syscall_seconds",
    "Time from entry to return of the workload's system calls, by family, sleeping and waiting inside the call "
    "included, counted when each call returns and only while the workload is timed "
    "(schedwatch_syscall_timed). Exported for families with time only.",
    (*WORKLOAD_LABELS, "family"),
)
PROCESSES_EXITED = CounterSpec(
    "schedwatch_processes_exited",
    "Processes of the workload that exited (their last thread did; threads that exit in a live process are not "
    "counted): short-lived processes, e.g. a fork and exec per request. Counted in the kernel at exit.",
    WORKLOAD_LABELS,
)
SYSCALL_TIMED = GaugeSpec(
    "schedwatch_syscall_timed",
    "1 while the workload's system calls are timed (schedwatch_syscall_seconds_total grows), 0 while only "
    "counted: by default the --syscall-timed-workloads workloads making the most calls per second are timed; "
    "with --syscall-time all, every workload.",
    WORKLOAD_LABELS,
)

# --- code attribution: on-CPU samples (oncpu collector) and call sites (syscalls collector) ----------------------
CODE_LABELS = ("library", "version", "function")
CPU_SAMPLES = CounterSpec(
    "schedwatch_cpu_samples",
    "On-CPU samples of the workload's threads (a cpu-clock timer on every CPU, schedwatch_cpu_sample_frequency_hertz "
    "times a second), by the library and function that was running (library: file name less a wheel's hash, "
    "[kernel] for kernel code, (unknown) where no mapping or symbol explains the address; version: the library's own, "
    "where it says; mode: user or kernel). The --code-top-k busiest rows per workload, the rest in one "
    'library="(other)" row; workloads beyond the --code-workloads busiest are counted in (other) only.',
    (*WORKLOAD_LABELS, *CODE_LABELS, "mode"),
)
CPU_SAMPLE_FREQUENCY = GaugeSpec(
    "schedwatch_cpu_sample_frequency_hertz",
    "On-CPU samples taken per second on each CPU: samples divided by this are CPU seconds.",
    (),
)
SCHED_YIELD_CALLS_BY_SITE = CounterSpec(
    "schedwatch_sched_yield_calls_by_site",
    "sched_yield(2) calls by the function that called the C library's sched_yield (or syscall) stub, read from the "
    "return address at the stub's stack pointer; the code that made the call itself where it did not use a stub. "
    "Top rows per workload as for schedwatch_cpu_samples_total, the rest in (other). x86-64 only.",
    (*WORKLOAD_LABELS, *CODE_LABELS),
)
FUTEX_WAITS_BY_SITE = CounterSpec(
    "schedwatch_futex_waits_by_site",
    "futex wait calls (FUTEX_WAIT, _BITSET, LOCK_PI, futex_waitv, futex_wait) by the function holding the system "
    "call instruction: library=libc.so.6 (the C library itself: pthread locks and condition variables) when the "
    "caller beyond it cannot be told without a stack walk. Top rows per workload, the rest in (other). x86-64 only.",
    (*WORKLOAD_LABELS, *CODE_LABELS),
)

# --- sched collector: off-CPU time and run-queue latency --------------------------------------
OFFCPU_SECONDS = CounterSpec(
    "schedwatch_offcpu_seconds",
    "Time the workload's threads spent off CPU: preempted (still runnable, waiting for a CPU) or blocked "
    "(sleeping; includes the wait for a CPU after the wake-up).",
    (*WORKLOAD_LABELS, "reason"),
)
OFFCPU_PERIODS = CounterSpec(
    "schedwatch_offcpu_periods",
    "Times the workload's threads were off CPU, by reason, counted as each period ends (the thread runs again): "
    "preempted (an involuntary context switch) or blocked (a voluntary one: a sleep, a wait). With "
    "schedwatch_offcpu_seconds_total, the mean length of each: many short sleeps are wake-ups that cost CPU.",
    (*WORKLOAD_LABELS, "reason"),
)
RUNQUEUE_LATENCY = HistogramSpec(
    "schedwatch_runqueue_latency_seconds",
    "Time from a thread becoming runnable (woken, new, or preempted) until it runs, per wait.",
    WORKLOAD_LABELS,
)
SCHED_EVENTS_MISSED = CounterSpec(
    "schedwatch_sched_events_missed",
    "Scheduler events of the workload's threads the kernel did not deliver, found when a thread's next event "
    "contradicted it: switch_in, a thread left a CPU without having been seen arriving (one lost switch: this "
    "thread's off-CPU period and its wait for a CPU not counted, nor the period of the thread it took the CPU from); "
    "wakeup, a thread ran after a sleep without having been seen woken (one wait not counted; Linux before 5.18 "
    "and from 6.16). Exported only where not 0.",
    (*WORKLOAD_LABELS, "event"),
)
RUNQUEUE_WAIT_BY_HOLDER_SECONDS = CounterSpec(
    "schedwatch_runqueue_wait_by_holder_seconds",
    "Time the workload's threads waited for a CPU (the sum of schedwatch_runqueue_latency_seconds), by who held "
    "it: self (a thread of the same workload), other (another workload), kernel (a kernel thread, or no task: an "
    "idle CPU waking up, or left idle while the workload's CPU quota was used up, see "
    "schedwatch_cpu_throttled_seconds_total). Each wait goes whole to the task the CPU switched from when the "
    "thread got it.",
    (*WORKLOAD_LABELS, "holder"),
)
RUNQUEUE_WAIT_BY_NEIGHBOUR_SECONDS = CounterSpec(
    "schedwatch_runqueue_wait_by_neighbour_seconds",
    'The part of schedwatch_runqueue_wait_by_holder_seconds_total{holder="other"} held by each other workload '
    "(neighbour: its name, as its own series name it), for the workload's few neighbours that held its CPUs most "
    'lately, each counted from when it became one of them; neighbour="(other)" the rest.',
    (*WORKLOAD_LABELS, "neighbour"),
)
BLOCKED_SECONDS = CounterSpec(
    "schedwatch_blocked_seconds",
    "Time the workload's threads slept, from leaving the CPU to their wake-up (the wait for a CPU after it not "
    "included), by state: interruptible (S: futex waits, sleeps, polls, pipes and sockets), uninterruptible (D and "
    "I: disk I/O, vfork, some locks). Counted when the thread runs again.",
    (*WORKLOAD_LABELS, "state"),
)
PROCESS_OFFCPU_SECONDS = CounterSpec(
    "schedwatch_process_offcpu_seconds",
    "Off-CPU time per live process by reason; only the most active processes are exported.",
    (*PROCESS_LABELS, "reason"),
)
PROCESS_RUNQUEUE_WAIT_BY_HOLDER_SECONDS = CounterSpec(
    "schedwatch_process_runqueue_wait_by_holder_seconds",
    "schedwatch_runqueue_wait_by_holder_seconds_total per live process; only the most active processes are exported.",
    (*PROCESS_LABELS, "holder"),
)
PROCESS_BLOCKED_SECONDS = CounterSpec(
    "schedwatch_process_blocked_seconds",
    "schedwatch_blocked_seconds_total per live process; only the most active processes are exported.",
    (*PROCESS_LABELS, "state"),
)
PROCESS_RUNQUEUE_WAIT_SECONDS = CounterSpec(
    "schedwatch_process_runqueue_wait_seconds",
    "Time the process's threads waited for a CPU; only the most active processes are exported.",
    PROCESS_LABELS,
)

# --- cgroup_cpu collector: limits and throttling from cgroup files -----------------------------
CPU_PERIODS = CounterSpec(
    "schedwatch_cpu_periods",
    "CFS enforcement periods that elapsed while the workload had runnable threads (cgroup cpu.stat).",
    WORKLOAD_LABELS,
)
CPU_THROTTLED_PERIODS = CounterSpec(
    "schedwatch_cpu_throttled_periods",
    "Enforcement periods in which the workload used up its CPU quota and was throttled (cgroup cpu.stat).",
    WORKLOAD_LABELS,
)
CPU_THROTTLED_SECONDS = CounterSpec(
    "schedwatch_cpu_throttled_seconds",
    "Time the workload's threads spent throttled by its CPU quota (cgroup cpu.stat).",
    WORKLOAD_LABELS,
)
CPU_LIMIT_CORES = GaugeSpec(
    "schedwatch_cpu_limit_cores",
    "CPUs the workload may use: the tighter of its CFS quota (over every ancestor cgroup) and its cpuset; "
    "the machine's online CPUs when neither limits it.",
    WORKLOAD_LABELS,
)
CPU_USAGE_SECONDS = CounterSpec(
    "schedwatch_cpu_usage_seconds",
    "CPU time used by the workload's cgroup and its descendants, by mode (user, system), from the cgroup's "
    "cpu.stat (cgroup2) or cpuacct (v1). Not exported for the root cgroup, whose totals are the machine's.",
    (*WORKLOAD_LABELS, "mode"),
)
THREADS = GaugeSpec(
    "schedwatch_threads",
    "Threads in the workload's cgroups now. Compare with schedwatch_cpu_limit_cores: far more busy threads "
    "than cores is oversubscription.",
    WORKLOAD_LABELS,
)


# --- cgroup_memory collector: the memory limit, its hits, page faults and refaults from cgroup files ------------
MEMORY_LIMIT_BYTES = GaugeSpec(
    "schedwatch_memory_limit_bytes",
    "The memory limit that applies to the workload: the tightest memory.max (cgroup2) or memory.limit_in_bytes "
    "(v1) over its cgroup and their ancestors. Only workloads with a limit have it.",
    WORKLOAD_LABELS,
)
MEMORY_EVENTS = CounterSpec(
    "schedwatch_memory_events",
    "Times the workload's memory hit a limit, by event as cgroup2's memory.events names them: high (over "
    "memory.high: throttled and reclaimed), max (a charge hit memory.max: reclaim, or v1's memory.failcnt), oom, "
    "oom_kill (a task of it was killed). Exported for events that happened only.",
    (*WORKLOAD_LABELS, "event"),
)
PAGE_FAULTS = CounterSpec(
    "schedwatch_page_faults",
    "Page faults of the workload's tasks (cgroup memory.stat pgfault, pgmajfault), by kind: minor (the page was in "
    "memory, or new and zeroed) and major (read from disk or swap).",
    (*WORKLOAD_LABELS, "kind"),
)
MEMORY_REFAULTS = CounterSpec(
    "schedwatch_memory_refaults",
    "Pages of the workload reclaimed and then faulted back in (memory.stat workingset_refault_anon + _file): its "
    "working set does not fit what it may keep in memory.",
    WORKLOAD_LABELS,
)

# --- pressure collector: the kernel's stall accounting (PSI), in every mode ---------------------------
PRESSURE_WAITING_SECONDS = CounterSpec(
    "schedwatch_pressure_waiting_seconds",
    "Time at least one task of the workload was stalled waiting for the resource (cpu, memory, io): PSI 'some' "
    "of its cgroup, as cAdvisor's container_pressure_*_waiting_seconds_total.",
    (*WORKLOAD_LABELS, "resource"),
)
PRESSURE_STALLED_SECONDS = CounterSpec(
    "schedwatch_pressure_stalled_seconds",
    "Time every non-idle task of the workload was stalled on the resource at once (cpu, memory, io): PSI 'full' "
    "of its cgroup, as cAdvisor's container_pressure_*_stalled_seconds_total.",
    (*WORKLOAD_LABELS, "resource"),
)
NODE_PRESSURE_WAITING_SECONDS = CounterSpec(
    "schedwatch_node_pressure_waiting_seconds",
    "Time at least one task of the node was stalled waiting for the resource (cpu, memory, io): /proc/pressure 'some'.",
    ("resource",),
)
NODE_PRESSURE_STALLED_SECONDS = CounterSpec(
    "schedwatch_node_pressure_stalled_seconds",
    "Time every non-idle task of the node was stalled on the resource at once: /proc/pressure 'full'.",
    ("resource",),
)

# --- diagnosis: the rules run on the agent's own series -----------------------------------------
FINDING = GaugeSpec(
    "schedwatch_finding",
    "1 while the diagnosis rules name this cause for the workload, judged on its counts over the last 10 s or "
    "more (schedwatch diagnose on the node adds its processes, libraries and the fix).",
    ("cause", "mechanism", *WORKLOAD_LABELS),
)
POOL_WORKERS = GaugeSpec(
    "schedwatch_pool_workers",
    "Pool workers of a workload the standing evaluation flags (its processes in groups sharing parent and command, "
    "else 1 for a lone process; absent when several processes form no group): what the fix needs to size each "
    "worker's threads. Only flagged workloads have it.",
    WORKLOAD_LABELS,
)
NODE_CPUS = GaugeSpec(
    "schedwatch_node_cpus",
    "The node's online CPUs, as the agent's rules count them.",
    (),
)

# --- the agent itself ---------------------------------------------------------------------------
BUILD_INFO = GaugeSpec(
    "schedwatch_build_info",
    "Always 1: the schedwatch version and the kernel it runs on.",
    ("version", "kernel_release"),
)
SOURCE_UP = GaugeSpec(
    "schedwatch_source_up",
    "1 when the collector is running, 0 when it could not start (see `schedwatch check`).",
    ("source",),
)
SOURCE_DEGRADED = GaugeSpec(
    "schedwatch_source_degraded",
    "1 for a collector that --mode auto wanted from BPF and that runs without it: in its perf or procfs form "
    "(runs_as), or not at all (runs_as none). cause: load_failed (BPF runs here, but this collector's program "
    "did not load: the verifier's words are in the log and `schedwatch check`) or unsupported (BPF cannot serve it "
    "here). Absent when every collector runs as asked.",
    ("source", "runs_as", "cause"),
)
COLLECT_DURATION = GaugeSpec(
    "schedwatch_collector_duration_seconds",
    "Time the collector took to read its maps and build its series during this scrape.",
    ("source",),
)
BPF_PROGRAM_RUNS = CounterSpec(
    "schedwatch_bpf_program_runs",
    "Times each BPF program ran, from the kernel's accounting (0 unless BPF stats are enabled).",
    SELF_PROGRAM_LABELS,
)
BPF_PROGRAM_RUN_SECONDS = CounterSpec(
    "schedwatch_bpf_program_run_seconds",
    "Time spent in each BPF program, from the kernel's accounting (0 unless BPF stats are enabled).",
    SELF_PROGRAM_LABELS,
)
BPF_PROGRAM_MISSES = CounterSpec(
    "schedwatch_bpf_program_misses",
    "Events each BPF program was not run for because a tracing BPF program (another tool's, or schedwatch's own) "
    "was already running on that CPU: the kernel's recursion_misses, counted for tracepoint programs since Linux "
    "6.7 (0 before).",
    SELF_PROGRAM_LABELS,
)
BPF_STATS_ENABLED = GaugeSpec(
    "schedwatch_bpf_stats_enabled",
    "1 when the kernel accounts BPF run time (kernel.bpf_stats_enabled or --bpf-stats).",
    (),
)
BPF_MAP_ENTRIES = GaugeSpec(
    "schedwatch_bpf_map_entries",
    "Entries in each bounded BPF map, counted at most every 30 s (a count walks the whole map).",
    SELF_MAP_LABELS,
)
BPF_MAP_MAX_ENTRIES = GaugeSpec(
    "schedwatch_bpf_map_max_entries",
    "Capacity of each bounded BPF map.",
    SELF_MAP_LABELS,
)
BPF_EVENTS_DROPPED = CounterSpec(
    "schedwatch_bpf_events_dropped",
    "Events not accounted because a bounded BPF map was full; raise its --max-* size if this grows.",
    SELF_MAP_LABELS,
)
TRACKED_SERIES = GaugeSpec(
    "schedwatch_workloads",
    "Workload label sets the agent currently exports, per collector (bounded by map sizes and expiry).",
    ("source",),
)
SAMPLES_DROPPED = CounterSpec(
    "schedwatch_samples_dropped",
    "Samples left out of scrapes because a label value could not be exported (not valid UTF-8, or too long); "
    "the collector's other samples were served. Should stay 0: report it as a bug.",
    ("collector",),
)
RUNTIME_LOOKUPS = CounterSpec(
    "schedwatch_runtime_lookups",
    "Container identity lookups asked of each runtime API, by result (ok, not_found, error).",
    ("runtime", "result"),
)
WEB_CONNECTIONS_DROPPED = CounterSpec(
    "schedwatch_web_connections_dropped",
    "Connections to /metrics closed without an answer, by reason: timeout (no complete request within "
    "--web.timeout, or a read or write stalled that long), evicted (the oldest connection still sending its "
    "request, closed to admit a new one at --web.max-connections), refused (at the bound, every connection "
    "being answered), tls_handshake_failed.",
    ("reason",),
)
WEB_CONNECTIONS_OPEN = GaugeSpec(
    "schedwatch_web_connections_open",
    "Connections to /metrics open now (at most --web.max-connections), this scrape's included.",
    (),
)

# --- modes without BPF (docs/modes.md) ----------------------------------------------------------
MODE = GaugeSpec(
    "schedwatch_mode",
    "Always 1: where the counts come from (bpf; perf: counting perf events and /proc; procfs: /proc alone).",
    ("mode",),
)
RUNQUEUE_WAIT_SECONDS = CounterSpec(
    "schedwatch_runqueue_wait_seconds",
    "Time the workload's threads waited on a run queue for a CPU, summed from each thread's schedstat "
    "(perf and procfs modes; in bpf mode see schedwatch_runqueue_latency_seconds_sum).",
    WORKLOAD_LABELS,
)
ONCPU_SECONDS = CounterSpec(
    "schedwatch_oncpu_seconds",
    "Time the workload's threads ran on a CPU, summed from each thread's schedstat (perf and procfs modes).",
    WORKLOAD_LABELS,
)
TASK_EXITS_UNRECORDED = CounterSpec(
    "schedwatch_task_exits_unrecorded",
    "Threads that exited without a taskstats exit record (perf and procfs modes): their time since the previous "
    "scrape is missing from schedwatch_runqueue_wait_seconds_total and schedwatch_oncpu_seconds_total.",
    (),
)
PERF_COUNTERS_OPEN = GaugeSpec(
    "schedwatch_perf_counters_open",
    "Counting perf events open (perf mode): CPUs x counted events x counted cgroups.",
    (),
)
PERF_CGROUPS_UNCOUNTED = GaugeSpec(
    "schedwatch_perf_cgroups_uncounted",
    "Cgroups without perf counters (over --max-cgroups or the file-descriptor limit, or refused by the kernel); "
    "their calls are counted in their nearest counted ancestor.",
    (),
)
PERF_COUNTS_EXACT = GaugeSpec(
    "schedwatch_perf_counts_exact",
    "Perf mode, per workload with counted calls: 1 when its sched_yield and futex counts are exactly its own tasks' "
    "calls; 0 when some of its calls may have been counted in an ancestor's series (a task of it ran before its "
    "counters had opened, as in a cgroup made just before its workload started, or while the kernel refused them), "
    "or its series may hold such calls of a cgroup below it. The totals stay exact; only where they are counted "
    "differs.",
    WORKLOAD_LABELS,
)
PERF_COUNTER_OPEN_FAILURES = CounterSpec(
    "schedwatch_perf_counter_open_failures",
    "Cgroups whose perf counters the kernel refused to open, by error (e.g. EMFILE: raise the file limit).",
    ("error",),
)

# Every metric above, in the order declared.
SPECS: tuple[MetricSpec, ...] = tuple(value for value in tuple(globals().values()) if isinstance(value, MetricSpec))
