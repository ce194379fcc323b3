"""The rules on facts: each cause from the facts that show it, nothing from healthy or missing facts."""

from __future__ import annotations

from dataclasses import replace

from agent.diagnosis import rules
from agent.diagnosis.facts import (
    CpuShares,
    Facts,
    LibraryView,
    NodeView,
    PoolView,
    ProcessView,
    ThreadView,
    Workload,
    WorkloadView,
)
from agent.diagnosis.findings import Cause, Confidence, Mechanism, Unchecked

NODE = NodeView(cpus=2, cpu=CpuShares(user=60, system=5, idle=35))
REF = Workload(cgroup="/scenario")
WORKERS = tuple(range(101, 105))

# Measured over 10 s on the scenarios of docs/diagnosis-scenarios.md (2 CPUs, a shared machine).
CONVOY = {
    "threads": 5,
    "cpu_used_cores": 0.97,
    "system_share": 0.016,
    "futex_calls": {"wait": 9_340.0, "wake": 9_350.0},
    "futex_wait_seconds": 27.8,
    "runqueue_wait_seconds": 1.44,
}
FIXED_NUMPY_POOL = {
    "threads": 8,
    "cpu_used_cores": 1.05,
    "system_share": 0.107,
    "futex_calls": {"wait": 3_880.0, "wake": 5_780.0},
    "futex_wait_seconds": 22.7,
    "runqueue_wait_seconds": 19.6,
}
CPU_HOGS = {"threads": 5, "cpu_used_cores": 1.50, "system_share": 0.001, "runqueue_wait_seconds": 24.9}


def workers(implementation: str | None, threads: int = 3, environment: tuple[tuple[str, str], ...] = ()) -> dict:
    """Four pool workers under pid 100, each with *threads* threads and the library mapped."""
    libraries = () if implementation is None else (implementation,)
    processes = tuple(
        ProcessView(pid, 100, "python", "python3.11", threads, 49.0, 5.0, (0, 1), libraries, environment)
        for pid in WORKERS
    )
    api = {"openblas": "blas", "gnu": "openmp"}.get(implementation or "", "blas")
    return {
        "processes": processes,
        "pools": (PoolView(100, "python3.11", WORKERS),),
        "libraries": () if implementation is None else (LibraryView(api, implementation, "0.3.23.dev", WORKERS),),
    }


def busy(**facts: object) -> WorkloadView:
    """A workload using both CPUs for 10 s, quiet unless *facts* say otherwise."""
    base = WorkloadView(
        ref=REF,
        seconds=10.0,
        cpus_allowed=2.0,
        cpu_used_cores=1.96,
        system_share=0.05,
        threads=13,
        sched_yield_calls=0.0,
        futex_calls={"wait": 10.0, "wake": 10.0},
        futex_wait_seconds=1.0,
        runqueue_wait_seconds=0.5,
        throttled_periods=None,
        periods=None,
    )
    return replace(base, **facts)  # type: ignore[arg-type]


def diagnose(*workloads: WorkloadView, node: NodeView = NODE):
    return rules.diagnose(Facts(node, workloads))


def only(diagnosis):
    assert len(diagnosis.findings) == 1, diagnosis.findings
    return diagnosis.findings[0]


def test_yield_storm_in_pool_workers_names_the_pool_and_the_thread_count():
    finding = only(
        diagnose(
            busy(sched_yield_calls=7_800_000.0, system_share=0.37, runqueue_wait_seconds=25.0, **workers("openblas"))
        )
    )
    assert (finding.cause, finding.mechanism, finding.confidence) == (
        Cause.THREAD_POOL_OVERSUBSCRIPTION,
        Mechanism.YIELD_STORM,
        Confidence.HIGH,
    )
    assert finding.workload == REF
    assert finding.processes == WORKERS
    assert finding.libraries == ("openblas 0.3.23.dev",)
    rate = next(e for e in finding.evidence if e.fact == "sched_yield calls per second per CPU")
    assert rate.value == 390_000.0
    threads = next(e for e in finding.evidence if e.fact == "threads in processes with a pool library")
    assert threads.value == 12
    # 2 CPUs shared by 4 workers: at least one thread each.
    assert finding.fix.threads_per_process == 1
    assert finding.fix.variables == {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    assert any("threadpool_limits(1)" in step for step in finding.fix.steps)


def test_thread_count_is_cpus_over_workers():
    view = busy(cpus_allowed=16.0, sched_yield_calls=7_800_000.0, **workers("openblas"))
    assert only(diagnose(view)).fix.threads_per_process == 4


def test_a_thread_variable_already_set_is_named_in_the_fix():
    view = busy(sched_yield_calls=7_800_000.0, **workers("openblas", environment=(("OPENBLAS_NUM_THREADS", "8"),)))
    steps = only(diagnose(view)).fix.steps
    assert any(
        "OPENBLAS_NUM_THREADS=8 is set in pid 101, 102, 103, 104" in step and "lower it to 1" in step for step in steps
    )


def test_pool_spinning_in_user_space_is_found_without_a_single_yield():
    finding = only(diagnose(busy(runqueue_wait_seconds=30.0, system_share=0.01, **workers("openblas"))))
    assert (finding.cause, finding.mechanism) == (Cause.THREAD_POOL_OVERSUBSCRIPTION, Mechanism.USER_SPACE_SPIN)
    assert finding.confidence is Confidence.HIGH


def test_openmp_pool_handing_off_on_futexes():
    view = busy(runqueue_wait_seconds=30.0, futex_calls={"wait": 30_000.0, "wake": 30_000.0}, **workers("gnu"))
    finding = only(diagnose(view))
    assert finding.mechanism is Mechanism.FUTEX_HANDOFF
    assert finding.fix.variables == {"OMP_NUM_THREADS": "1"}
    assert any("OMP_WAIT_POLICY=passive" in step for step in finding.fix.steps)


def test_pool_threads_over_the_cpus_but_nobody_waiting_is_healthy():
    view = busy(runqueue_wait_seconds=0.3, **workers("openblas", threads=2))
    assert diagnose(view).findings == ()


def test_the_fixed_pool_one_thread_per_worker_is_healthy_though_workers_outnumber_cpus():
    # 4 single-threaded workers on 2 CPUs wait for CPUs now and then, hand tasks over futexes, and are not busy.
    assert diagnose(busy(**FIXED_NUMPY_POOL, **workers("openblas", threads=1))).findings == ()


def test_cpu_hogs_measured_on_a_shared_machine_saturate():
    finding = only(diagnose(busy(**CPU_HOGS, **workers(None, threads=1))))
    assert finding.cause is Cause.RUN_QUEUE_SATURATION


def test_cpu_bound_processes_without_a_pool_saturate_the_run_queue():
    finding = only(diagnose(busy(runqueue_wait_seconds=20.0, **workers(None))))
    assert (finding.cause, finding.mechanism) == (Cause.RUN_QUEUE_SATURATION, Mechanism.TOO_MANY_RUNNABLE)
    assert finding.confidence is Confidence.HIGH
    wanted = next(e for e in finding.evidence if e.fact == "threads wanting a CPU on average")
    assert wanted.value == 3.96


def test_waiting_with_the_libraries_unknown_is_unchecked_not_a_guess():
    # Threads wait for CPUs, but whether a thread pool is behind it cannot be told without the libraries.
    diagnosis = diagnose(busy(runqueue_wait_seconds=20.0))
    assert diagnosis.findings == ()
    (unchecked,) = diagnosis.unchecked
    assert isinstance(unchecked, Unchecked) and unchecked.rule is Cause.THREAD_POOL_OVERSUBSCRIPTION
    assert any("/proc/PID/maps" in step for step in unchecked.collect_next)


def test_lock_convoy():
    view = busy(**CONVOY, **workers(None, threads=4))
    finding = only(diagnose(view))
    assert (finding.cause, finding.mechanism) == (Cause.FUTEX_CONTENTION, Mechanism.LOCK_CONVOY)


def test_idle_threads_parked_on_futexes_are_not_a_convoy():
    # A pool of 8 idle threads: blocked all the time, but hardly a call.
    view = busy(cpu_used_cores=0.01, futex_calls={"wait": 8.0, "wake": 0.0}, futex_wait_seconds=80.0, **workers(None))
    assert diagnose(view).findings == ()


def test_throttling_names_a_limit_above_the_demand():
    view = busy(
        cpus_allowed=0.5,
        cpu_limit_cores=0.5,
        cpu_used_cores=0.5,
        runqueue_wait_seconds=0.0,
        throttled_periods=98.0,
        periods=100.0,
        throttled_seconds=14.9,
        **workers(None),
    )
    finding = only(diagnose(view))
    assert (finding.cause, finding.mechanism) == (Cause.CPU_THROTTLING, Mechanism.QUOTA)
    # Used 0.5 CPU and was throttled 1.49 s per second: it wanted ~2 CPUs.
    assert finding.fix.summary.startswith("Raise its CPU limit from 0.5 to at least 2 CPUs")


def test_a_throttled_workload_is_throttling_not_saturation():
    # One CPU-bound process under a 0.5-CPU quota: runnable while the quota holds it back (measured: 1.0 s/s of
    # run-queue wait per CPU), which is the throttling's doing.
    view = busy(
        cpus_allowed=0.5,
        cpu_limit_cores=0.5,
        cpu_used_cores=0.5,
        threads=1,
        runqueue_wait_seconds=5.0,
        throttled_periods=98.0,
        periods=100.0,
        throttled_seconds=5.0,
        **workers(None, threads=1),
    )
    assert [finding.cause for finding in diagnose(view).findings] == [Cause.CPU_THROTTLING]


def test_cpu_hogs_are_saturation_even_when_the_node_leaves_them_little_cpu():
    # 4 hogs on 2 CPUs of a full node: 1.17 CPUs used, 2.8 threads waiting on average.
    view = busy(threads=5, cpu_used_cores=1.17, runqueue_wait_seconds=28.3, **workers(None, threads=1))
    assert only(diagnose(view)).cause is Cause.RUN_QUEUE_SATURATION


def test_a_healthy_sleeper_and_a_workload_with_no_facts_give_nothing():
    sleeper = busy(
        cpu_used_cores=0.0, futex_calls={"wait": 0.0, "wake": 0.0}, futex_wait_seconds=0.0, runqueue_wait_seconds=0.0
    )
    unknown = WorkloadView(ref=Workload(cgroup="/nothing-known"))
    diagnosis = diagnose(sleeper, unknown, node=NodeView())
    assert (diagnosis.findings, diagnosis.unchecked, diagnosis.observations) == ((), (), ())


def perf_trace_threads(yields: list[int]) -> tuple[ThreadView, ...]:
    return tuple(
        ThreadView(
            tid=2800 + i,
            comm="python",
            sched_yield_calls=calls,
            sched_yield_seconds=calls * 1.2e-5,
            futex_calls=3000,
            futex_max_seconds=21.9,
        )
        for i, calls in enumerate(yields)
    )


def test_without_a_clock_many_threads_yielding_millions_of_times_are_a_storm():
    view = WorkloadView(ref=Workload(), thread_views=perf_trace_threads([5_119_771, 5_475_608, 5_046_875]))
    finding = only(diagnose(view, node=NodeView()))
    assert (finding.cause, finding.mechanism, finding.confidence) == (
        Cause.THREAD_POOL_OVERSUBSCRIPTION,
        Mechanism.YIELD_STORM,
        Confidence.MEDIUM,
    )
    median = next(e for e in finding.evidence if e.fact == "sched_yield calls per spinning thread (median)")
    assert median.value == 5_119_771
    longest = next(e for e in finding.evidence if e.fact == "longest futex wait of those threads")
    assert longest.value == 21.9
    assert finding.fix.threads_per_process is None  # CPUs unknown: the fix says how to compute it
    assert "N = the CPUs it may use / its pool workers, at least 1" in finding.fix.summary
    assert finding.fix.steps[0].startswith("Set OPENBLAS_NUM_THREADS=N, MKL_NUM_THREADS=N, OMP_NUM_THREADS=N in")


def test_a_tracer_slowed_storm_is_found_by_the_time_in_sched_yield():
    # perf trace slows the loop ~30x: numpy 1.26 pool threads made 2,500-87,000 calls but spent 0.9-3.4 s in them.
    threads = tuple(
        ThreadView(tid=900 + i, comm="python", sched_yield_calls=calls, sched_yield_seconds=seconds)
        for i, (calls, seconds) in enumerate([(2_500, 0.9), (87_000, 3.4), (40_000, 2.1)])
    )
    finding = only(diagnose(WorkloadView(ref=Workload(), thread_views=threads), node=NodeView()))
    assert finding.mechanism is Mechanism.YIELD_STORM
    assert next(e for e in finding.evidence if e.fact == "threads spinning in sched_yield").value == 3


def test_a_yield_count_without_threads_or_clock_is_unchecked_not_a_finding():
    # strace -c -f: one table for every thread, and no duration.
    diagnosis = diagnose(WorkloadView(ref=Workload(), sched_yield_calls=112_764.0), node=NodeView())
    assert diagnosis.findings == ()
    (unchecked,) = diagnosis.unchecked
    assert unchecked.rule is Cause.THREAD_POOL_OVERSUBSCRIPTION
    assert "which threads yielded (one spinning thread or a pool)" in unchecked.missing


def test_one_thread_handing_work_over_is_not_a_storm():
    # The seed's bare metal: one thread 1.6 M yields in 4.0 s, the main thread 39 k in 0.13 s, the rest parked.
    threads = (
        ThreadView(tid=114304, comm="python", sched_yield_calls=1_599_811, sched_yield_seconds=3.996),
        ThreadView(tid=113694, comm="python", sched_yield_calls=39_353, sched_yield_seconds=0.131),
        *(ThreadView(tid=114305 + i, comm="python", futex_calls=1) for i in range(20)),
    )
    view = WorkloadView(ref=Workload(), thread_views=threads)
    assert diagnose(view, node=NodeView()).findings == ()


def test_high_system_time_nothing_explains_is_an_observation_not_a_finding():
    node = NodeView(cpus=2, cpu=CpuShares(user=40, system=45, idle=15))
    clocky = WorkloadView(ref=Workload(cgroup="/clock"), syscall_seconds={"clock_gettime": 40.0, "futex": 2.0})
    diagnosis = diagnose(clocky, node=node)
    assert diagnosis.findings == ()
    (observation,) = diagnosis.observations
    assert observation.topic == "system-time-unexplained"
    assert "clock source" in observation.summary
    assert observation.look_next[0].startswith("cat /sys/devices/system/clocksource")


def test_system_time_a_yield_storm_explains_is_not_observed_again():
    node = NodeView(cpus=2, cpu=CpuShares(user=50, system=43, idle=7))
    view = busy(sched_yield_calls=7_800_000.0, **workers("openblas"))
    diagnosis = diagnose(view, node=node)
    assert [f.mechanism for f in diagnosis.findings] == [Mechanism.YIELD_STORM]
    assert diagnosis.observations == ()


def test_steal_softirq_and_iowait_are_observations_with_their_shares():
    node = NodeView(cpus=2, cpu=CpuShares(user=30, system=5, idle=20, iowait=25, softirq=12, steal=15))
    diagnosis = diagnose(busy(**workers("openblas", threads=1)), node=node)
    assert diagnosis.findings == ()
    shown = {o.topic: (o.evidence[0].value, o.summary) for o in diagnosis.observations}
    assert set(shown) == {"steal", "softirq", "iowait"}
    assert shown["steal"][0] == 15 and shown["steal"][1].startswith("The hypervisor gave 15 %")
    assert shown["softirq"][0] == 12 and shown["iowait"][0] == 25


def test_cpu_states_under_their_bars_are_not_observed():
    node = NodeView(cpus=2, cpu=CpuShares(user=60, system=5, idle=15, iowait=19.9, softirq=9.9, steal=9.9))
    assert diagnose(busy(**workers("openblas", threads=1)), node=node).observations == ()
