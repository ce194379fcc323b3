"""Diagnoses made by hand for the renderer tests: the renderers draw what a diagnosis holds and know nothing of
the rules, so their tests do not depend on what the rules conclude. Names are hostile on purpose: rich markup,
HTML, a terminal escape, a link."""

from __future__ import annotations

from agent.diagnosis.comparison import WOULD_TELL, Comparison, Difference, Slower
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
from agent.diagnosis.findings import (
    Cause,
    Confidence,
    Diagnosis,
    Evidence,
    Finding,
    Fix,
    Mechanism,
    Observation,
    Unchecked,
)
from agent.diagnosis.render.provenance import Made

MADE = Made("0.1.0", "2026-12-07T04:31:05Z", "analyze")  # a fixed provenance, so that goldens do not move
HOSTILE_CONTAINER = "[bold red]pwn[/] <script>alert(1)</script>"
HOSTILE_COMM = "\x1b[31mred</td><img src=https://evil.example/x.png>"
SICK = Workload(container_id="0123456789abcdef", container=HOSTILE_CONTAINER, cgroup="/docker/0123456789abcdef")
CALM = Workload(cgroup="/system.slice/sshd.service")


def sick_workload() -> WorkloadView:
    return WorkloadView(
        ref=SICK,
        seconds=10.0,
        cpus_allowed=2.0,
        cpu_used_cores=1.97,
        system_share=0.367,
        threads=9,
        sched_yield_calls=7_800_000.0,
        futex_calls={"wait": 1200.0, "wake": 1150.0},
        futex_wait_seconds=31.5,
        runqueue_wait_seconds=14.2,
        processes=(
            ProcessView(pid=101, ppid=1, comm="python", command="python", threads=1, cpu_percent=4.0),
            ProcessView(
                pid=102,
                ppid=101,
                comm="python",
                command="python",
                threads=2,
                cpu_percent=49.5,
                system_percent=18.0,
                libraries=("openblas",),
                environment=(),
            ),
            ProcessView(pid=103, ppid=101, comm=HOSTILE_COMM, command=HOSTILE_COMM, threads=2, cpu_percent=48.0),
        ),
        pools=(PoolView(parent_pid=101, command="python", pids=(102, 103)),),
        libraries=(LibraryView(api="blas", implementation="openblas", version="0.3.23.dev", pids=(102, 103)),),
        thread_views=(
            ThreadView(tid=102, comm="python", pid=102, sched_yield_calls=3_900_000, sched_yield_seconds=4.1),
            ThreadView(tid=104, comm=HOSTILE_COMM, pid=103, sched_yield_calls=3_900_000, sched_yield_seconds=3.9),
            ThreadView(tid=105, comm="python", pid=103, futex_calls=1, futex_seconds=9.5, futex_max_seconds=9.5),
        ),
        # Its time budget: 9 threads x 10 s = 19.7 s running + 14.2 s waiting + 56.1 s blocked.
        user_seconds=12.5,
        system_seconds=7.2,
        syscall_calls_by_family={"yield": 7_800_000.0, "futex": 2350.0, "memory": 120.0, "file": 64.0, "other": 40.0},
        syscall_seconds_by_family={"yield": 5.9, "futex": 31.6, "memory": 0.002, "file": 0.01, "other": 0.0},
        waiting_by_holder={"self": 13.1, "other": 0.9, "kernel": 0.2},
        blocked_by_kind={"futex": 31.5, "io": 0.0, "sleep": 24.6},
        pressure_waiting_seconds={"cpu": 8.1, "memory": 0.0, "io": 0.0},
        pressure_stalled_seconds={"cpu": 2.2, "memory": 0.0, "io": 0.0},
    )


def sample_diagnosis() -> Diagnosis:
    """A node with a yield storm in one container, a calm workload, an unchecked rule and an observation."""
    facts = Facts(
        node=NodeView(
            cpus=2,
            cpu=CpuShares(user=61.0, nice=0.0, system=36.5, idle=2.5, iowait=0.0, irq=0.0, softirq=0.0, steal=0.0),
            run_queue=6.0,
            load_average=(5.9, 3.2, 1.1),
            context_switches_per_second=412_000.0,
        ),
        workloads=(
            WorkloadView(ref=CALM, seconds=10.0, cpu_used_cores=0.01, threads=1, sched_yield_calls=0.0),
            sick_workload(),
        ),
        sources=("bpf", "/proc"),
        notes=("a note on what the sources could not tell",),
    )
    finding = Finding(
        cause=Cause.THREAD_POOL_OVERSUBSCRIPTION,
        mechanism=Mechanism.YIELD_STORM,
        workload=SICK,
        processes=(102, 103),
        libraries=("openblas 0.3.23.dev",),
        evidence=(
            Evidence("sched_yield calls per second per CPU", 390_000.0, "/s", "healthy: below 2,000"),
            Evidence("threads in processes with a pool library", 4, "threads", "CPUs it may use: 2"),
            Evidence("system share of its CPU time", 36.7, "%", "healthy compute: below 10 %"),
        ),
        confidence=Confidence.HIGH,
        fix=Fix(
            summary="Limit each worker's OpenBLAS pool to 1 thread (OPENBLAS_NUM_THREADS=1).",
            steps=("Set OPENBLAS_NUM_THREADS=1 in the container's environment.", "Or threadpool_limits(1)."),
            threads_per_process=1,
        ),
        explanation="Idle pool threads spin in sched_yield.",
        collect_next=(),
    )
    unchecked = Unchecked(
        rule=Cause.FUTEX_CONTENTION,
        workload=CALM,
        missing=("futex calls by operation",),
        collect_next=("run `schedwatch diagnose` on the node",),
    )
    observation = Observation(
        topic="steal",
        summary="The hypervisor took 12 % of the CPU time.",
        evidence=(Evidence("node CPU time stolen", 12.0, "%", "bar 10 %"),),
        look_next=("the VM's host",),
    )
    return Diagnosis(facts, (finding,), (unchecked,), (observation,))


def healthy_diagnosis() -> Diagnosis:
    facts = Facts(node=NodeView(cpus=2), workloads=(WorkloadView(ref=CALM, threads=1),), sources=("bpf",))
    return Diagnosis(facts, (), (), ())


def sample_comparison() -> Comparison:
    sick, healthy = sample_diagnosis(), healthy_diagnosis()
    return Comparison(
        a_name="cloud <b>VM</b>",
        b_name="laptop",
        a=sick,
        b=healthy,
        differences=(
            Difference("threads that yielded 100,000+ times", 2.0, 0.0, "threads"),
            Difference("time in sched_yield, all threads", 8.0, 0.5, "s"),
            Difference("node CPU time in the kernel (sy)", 36.5, None, "%"),
        ),
        explanation=("In cloud VM 2 threads spin; in laptop none.",),
        cause=sick.findings[0],
        cause_side="cloud <b>VM</b>",
        slower=Slower("cloud <b>VM</b>", None, "the cause is there", WOULD_TELL),
    )
