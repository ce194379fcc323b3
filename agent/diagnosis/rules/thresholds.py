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
    # At least this many spinning threads make a pool storm: the seed's bare-metal hand-off was 1 thread, its GCP
    # storm 16 (one thread handing work over is not one).
    storm_threads: int = 2
    # Threads waiting for a CPU: seconds of run-queue wait per second, per CPU the workload may use.
    # Measured (docs/diagnosis-rules.md): numpy pools 2.8-3.2 s/s per CPU, 4 hogs 1.2, the fixed pool 1.0, a lock
    # convoy 0.07, a sleeper 0.
    runqueue_wait_per_cpu: float = 0.25
    # Saturation: threads wanting a CPU on average (CPU used + run-queue wait per second) per CPU it may use. 4 CPU
    # hogs on 2 CPUs want 4 CPUs (2.0 per CPU) however busy the node; the fixed 4-worker numpy pool, whose workers
    # also wait for their parent, measured 1.25-1.45 per CPU on a loaded machine and 1.7 once on a full one.
    wanted_per_cpu: float = 1.8
    # ... and it must hold at least this share of its CPUs: workers that wait mostly behind other workloads of a
    # loaded node (a fixed pool recorded at 28 % busy, 3.4 threads wanting 2 CPUs) are not saturating it
    # themselves; 4 hogs on a full node still held 58 %.
    busy_share: float = 0.5
    # Futex hand-offs of a pool: futex calls per second per CPU.
    # The scenario pools made 94-388 futex waits a second in all (numpy 2.x, the fixed pool), a lock convoy 934: a
    # pool handing off work for every region makes thousands per CPU.
    futex_handoffs_per_cpu: float = 1_000.0
    # A lock convoy: futex waits per second, wakes per wait, share of its threads blocked on average (a convoy of
    # 4 threads measured 930-960 waits/s and 2.8 of 5 threads blocked; a healthy 4-worker pool 390 waits/s and 2.3
    # of 8 blocked).
    convoy_waits_per_second: float = 100.0
    convoy_wakes_per_wait: float = 0.3
    convoy_blocked_share: float = 0.4
    convoy_blocked_threads: float = 0.5  # when the thread count is unknown
    # Throttling: share of CFS periods throttled, and at least this many periods seen.
    # (The public k0s#4954 pod: 496 of 1,197 periods throttled, 41 %; netdata#12595's examples: 2 of 7 periods.)
    throttled_share: float = 0.2
    throttled_min_periods: int = 10
    # Node observations (percent of the node's CPU time).
    # System time: the recorded sick pool's top showed 24.8 % sy, the shared machine alone 12 % (sick_mpstat.txt).
    # Steal: an idle VM lent 7-10 % of its time to its host (no finding), an EC2 m3.medium 54 % (coreos/bugs#73).
    # Soft interrupts and I/O wait: not measured here; the operators' usual bars (10 % and 20 %), for observations
    # that only say where to look, never a cause.
    system_percent: float = 20.0
    steal_percent: float = 10.0
    softirq_percent: float = 10.0
    iowait_percent: float = 20.0
    # The other causes (issue 26), measured on their scenarios (docs/diagnosis-scenarios.md), 10 s windows.
    # Clock reads that reach the kernel: a program reading the clock through syscall(2) between bits of work made
    # 1.85 M/s (64 % of its CPU in the kernel); through the vDSO, and in every other scenario, 0.
    clock_calls_per_second: float = 10_000.0
    clock_system_share: float = 0.2  # ... and that much of its CPU time in the kernel: the reads cost something
    # Polling: sleeps and polls a second. 2 workers looking for work every 50 us made 18,700 sleeps/s, 0.15 ms
    # blocked each, 84 % of their CPU in the kernel; 2 in epoll_wait with a 0 timeout 3.6 M polls/s, 53 %. The
    # healthy twins: 100 wake-ups/s (blocked on an eventfd), 960 paced 1 ms sleeps/s, the lock scenario's 4,000
    # sleeps/s of 1 ms; the numpy pool's 4,300 polls and sleeps/s average 0.42 ms but are hand-offs of work, not idle
    # (a pool finding explains them; its kernel share is 9-12 % without the storm).
    polling_calls_per_second: float = 2_000.0
    polling_mean_seconds: float = 0.0005  # blocked per sleep or poll, at most
    polling_sleep_share: float = 0.5  # of its blocked time, in sleeps and polls (not futex waits, not I/O)
    polling_system_share: float = 0.3
    # Process churn: processes exited a second. A fork and exec of /bin/true per request at 200/s: 200/s, 0.18 CPU
    # (79 % in the kernel); the same requests handed to one kept process: 0, as every other scenario.
    churn_exits_per_second: float = 20.0
    churn_cpu_cores: float = 0.05  # ... costing at least this much CPU: a few short jobs a second are no churn
    # Allocator churn: page faults a second with memory mapped and unmapped. A 64 MiB buffer malloc'ed, written and
    # freed over and over: 408,000 faults/s, 50 mmap+munmap/s, 92 % in the kernel; kept by the allocator: 0 faults.
    # The numpy pools fault 14,000/s (174 memory calls/s), 200 execs/s 14,000/s.
    alloc_faults_per_second: float = 100_000.0
    alloc_map_calls_per_second: float = 10.0
    alloc_system_share: float = 0.3
    alloc_calls_without_faults: float = 2_000.0  # memory calls a second that alone, faults unknown, make it likely
    # A noisy neighbour: a thread computing 2 ms and sleeping 2 ms on CPU 1 beside another workload's 2 hogs there
    # waited 0.29 s/s, all of it for the other workload (its CPU: 0.35); with the hogs on CPU 0, 0.003 s/s. A numpy
    # pool beside a hog waited 6.9 s/s, 2.7 % of it for others.
    neighbour_wait_per_second: float = 0.1  # threads waiting for other workloads, on average
    neighbour_share: float = 0.5  # of its whole wait for a CPU
    neighbour_wait_to_cpu: float = 0.25  # waited for others at least this share of the time it ran
    # A light, latency-sensitive workload (0.5 ms of work every 20 ms, 2 % of a CPU) beside another workload's hog on
    # its CPU waits for it about as long as, or longer than, it runs, yet far under 0.1 s/s (tests/kernel/
    # test_neighbour_light.py asserts what the kernel counted); with the hog on the other CPU it waits ~0. So: waiting
    # for others at least as long as it ran, and at least this much (below it, a few scheduler ticks).
    neighbour_wait_relative: float = 1.0
    neighbour_wait_floor: float = 0.005
    # The fix names a neighbour only when it held at least this share of the wait for other workloads: then no other
    # neighbour, exported or not (one whose series is unknown for the window), held as much. The noisy-neighbour
    # scenario's companion held 100 % of it; the hog beside the numpy pool 85 % (the root cgroup the rest).
    neighbour_named_share: float = 0.5
    # Hypervisor steal: node steal (steal_percent above) while the workload waits for a CPU this much per CPU, not
    # mostly behind its own threads. This VM's host stole 0-21 % in the scenario runs; with 21 % stolen, 200 execs/s
    # waited 0.08 s/s per CPU (97 % of it with the CPU idle or in the kernel); a numpy pool waits 3 s/s per CPU, 96 %
    # behind its own threads.
    steal_wait_per_cpu: float = 0.1
    steal_own_wait_share: float = 0.5
    # Memory pressure: a 192 MiB file read over and over under a 96 MiB limit hit the limit 1,000 times/s and
    # refaulted 280,000 pages/s (1.1 GB/s: its I/O pressure 45 %, memory 1.2 %); under 512 MiB, 0 and 0.
    memory_limit_hits_per_second: float = 1.0
    memory_refaults_per_second: float = 1_000.0  # 4 MB/s of its pages read back after reclaim
    memory_stall_share: float = 0.1  # PSI memory "some": stalled this share of the time, with limit hits alone
    # Unexplained: kernel time no cause explains, when the budget was measured. getrusage(2) as fast as one thread
    # can: 0.77-0.86 of a CPU in the kernel (79-86 %, two runs); paced at 1,000/s: 0.02 CPU. The request server: 0.01.
    unexplained_system_cores: float = 0.25
    unexplained_system_share: float = 0.5
    io_call_share: float = 0.8  # of its calls, reads and writes (file, network): its kernel time is the I/O it asks
    # Stacks (rules/stacks.py). A dump is one moment: a pool's threads in sched_yield in 2 of its stacks (the public
    # OpenBLAS#4496 paste, robotology codyco-modules#112's 3 threads) name it at low confidence, 3 or more at medium;
    # one pool thread yielding is its normal wait (OpenBLAS#660's one thread was a deadlock). A profile: at least this
    # share of its samples (as the code observations' bar), medium from this many samples (the recorded numpy 1.26
    # pool: 61 % of 1,038 samples in OpenBLAS's yield; the fixed pool 0 %).
    stack_threads_thin: int = 2
    stack_threads: int = 3
    stack_share: float = 0.2
    stack_samples: int = 200
    # Run-queue saturation by other load (rules/runqueue_waits.py), from a histogram of each wait: a light victim
    # (tests/workloads/duty.c: 1 ms of work, 4 ms asleep, on CPU 1) beside 3 hogs on its CPU waited 4 ms or longer
    # in 32 % of 437 waits while it used 0.06 CPU; alone on the same (shared, loaded) machine 7 % of 720 waits at
    # 0.08 CPU; an idle machine (iovisor/bcc#1732) 1 in 17,591. A time slice is 0.75-3 ms (EEVDF's base slice scaled
    # by the CPUs): a wait of 4 ms is a queue of other tasks ahead of it.
    runqueue_long_wait: float = 0.004
    runqueue_long_share: float = 0.25
    runqueue_min_waits: int = 50  # fewer waits are a moment, not a pattern
    light_cpu_cores: float = 0.5  # "far below its CPU": at most half a CPU (and half of what it may use)


DEFAULT = Thresholds()
