"""The causes read from stacks and from each run-queue wait (rules/stacks.py, rules/runqueue_waits.py), on facts: the
stack classifier's groups as the formats give them, and histograms with the numbers recorded in
tests/unit/fixtures/artifacts (the victim beside its hogs: 32 % of 437 waits 4 ms or longer at 0.06 CPU)."""

from __future__ import annotations

from agent.diagnosis.facts import (
    CpuShares,
    Facts,
    NodeView,
    ProcessView,
    StackEvidence,
    TaskDelay,
    WaitHistogram,
    Workload,
    WorkloadView,
)
from agent.diagnosis.findings import Cause, Confidence, Finding, Mechanism, Unchecked
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.stack_classes import Counted, classify, leaf_and_owner
from agent.diagnosis.rules import diagnose

LIBC = "libc.so.6"
OPENBLAS = "libopenblasp-r0.3.21.so"
YIELDING = (Frame("__sched_yield", LIBC), Frame("blas_thread_server", OPENBLAS), Frame("start_thread", LIBC))
SPINNING = (Frame("blas_thread_server", OPENBLAS), Frame("start_thread", LIBC))
WORKING = (Frame("dgemm_kernel_HASWELL", OPENBLAS), Frame("main", "(program)"))
TCMALLOC_LOCK = (
    Frame("base::internal::SpinLockDelay", "(program)"),
    Frame("SpinLock::SlowLock", "(program)"),
    Frame("tcmalloc::CentralFreeList::InsertRange", "(program)"),
    Frame("tc_delete", "(program)"),
    Frame("Json::FastWriter::writeValue", "(program)"),
)
GLIBC_ARENA = (
    Frame("__lll_lock_wait_private", LIBC),
    Frame("_int_free", LIBC),
    Frame("free", LIBC),
    Frame("parse_record", "(program)"),
)
MUTEX = (Frame("__lll_lock_wait", "libpthread.so.0"), Frame("pthread_mutex_lock", "libpthread.so.0"),
         Frame("update_cache", "(program)"), Frame("worker", "(program)"))  # fmt: skip


def stacks(*groups: tuple[tuple[Frame, ...], int], unit: str = "threads") -> StackEvidence:
    counted = []
    thread = 0
    for frames, weight in groups:
        for _ in range(weight if unit == "threads" else 1):
            thread += 1
            counted.append(Counted(frames, 1.0 if unit == "threads" else float(weight), thread))
    found = classify(counted, unit)
    assert found is not None
    return found


def diagnosed(evidence: StackEvidence, node: NodeView | None = None) -> Facts:
    return Facts(node=node or NodeView(), workloads=(WorkloadView(ref=Workload(), stacks=evidence),))


def findings(facts: Facts) -> list[Finding]:
    return list(diagnose(facts).findings)


def test_the_classifier_names_the_leaf_and_its_owner() -> None:
    assert leaf_and_owner(YIELDING)[0::2] == ("yield", "pool")
    assert leaf_and_owner(YIELDING)[3] == "openblas"
    assert leaf_and_owner(SPINNING)[0::2] == ("spin", "pool")
    assert leaf_and_owner(WORKING)[0::2] == ("running", "pool")
    leaf, owner, kind, allocator = leaf_and_owner(TCMALLOC_LOCK)
    assert (leaf, kind, allocator) == ("allocator-lock", "allocator", "tcmalloc") and owner is not None
    assert owner.function == "tcmalloc::CentralFreeList::InsertRange"
    assert leaf_and_owner(GLIBC_ARENA)[0::2] == ("allocator-lock", "allocator")
    leaf, owner, kind, _ = leaf_and_owner(MUTEX)
    assert (leaf, kind) == ("lock", "program") and owner is not None and owner.function == "update_cache"
    gil = (Frame("take_gil", "libpython3.11.so"), Frame("PyEval_RestoreThread", "libpython3.11.so"),
           Frame("spin", "y.py"))  # fmt: skip
    assert leaf_and_owner(gil)[0::2] == ("gil", "program")
    preempted = (Frame("__schedule", "[kernel]"), Frame("preempt_schedule_irq", "[kernel]"),
                 Frame("asm_sysvec_apic_timer_interrupt", "[kernel]"), Frame("compute", "(program)"))  # fmt: skip
    assert leaf_and_owner(preempted)[0::2] == ("preempted", "program")
    reclaim = (Frame("shrink_node", "[kernel]"), Frame("try_to_free_pages", "[kernel]"),
               Frame("__alloc_pages_slowpath", "[kernel]"), Frame("exc_page_fault", "[kernel]"),
               Frame("memset", LIBC), Frame("fill", "(program)"))  # fmt: skip
    assert leaf_and_owner(reclaim)[0] == "reclaim"
    assert leaf_and_owner((Frame("__lll_lock_wait", "libpthread.so.0"),))[0::2] == ("lock", "unknown")
    # glibc 2.36 under gdb: its inlined futex_wait under __lll_lock_wait under pthread_mutex_lock is a mutex wait
    glibc236 = (Frame("futex_wait", "(program)", "../sysdeps/nptl/futex-internal.h"),
                Frame("__GI___lll_lock_wait", "(program)", "./nptl/lowlevellock.c"),
                Frame("lll_mutex_lock_optimized", "(program)", "./nptl/pthread_mutex_lock.c"),
                Frame("___pthread_mutex_lock", "(program)", "./nptl/pthread_mutex_lock.c"),
                Frame("work", "(program)", "lock_convoy.c"))  # fmt: skip
    leaf, owner, kind, _ = leaf_and_owner(glibc236)
    assert (leaf, kind) == ("lock", "program") and owner is not None and owner.function == "work"
    # where the kernel says a stack stands wins over the user frames' markers
    off_cpu = (Frame("finish_task_switch", "[kernel]"), Frame("preempt_schedule_irq", "[kernel]"),
               Frame("futex_wait", LIBC), Frame("__lll_lock_wait", LIBC), Frame("work", "(program)"))  # fmt: skip
    assert leaf_and_owner(off_cpu)[0] == "preempted"


def test_a_pools_yielding_threads_name_the_pool_at_the_confidence_the_threads_support() -> None:
    assert findings(diagnosed(stacks((YIELDING, 1)))) == []  # one pool thread yielding: its normal wait
    (thin,) = findings(diagnosed(stacks((YIELDING, 2), (WORKING, 1))))
    assert (thin.cause, thin.mechanism, thin.confidence) == (
        Cause.THREAD_POOL_OVERSUBSCRIPTION,
        Mechanism.YIELD_STORM,
        Confidence.LOW,
    )
    assert thin.libraries == ("openblas",) and "OPENBLAS_NUM_THREADS" in thin.fix.summary
    assert thin.fix.threads_per_process is None  # the stacks tell no CPUs and no workers: the formula, no number
    assert any(step.startswith("perf trace -s") for step in thin.collect_next)
    (strong,) = findings(diagnosed(stacks((YIELDING, 3), (WORKING, 1))))
    assert strong.confidence is Confidence.MEDIUM and strong.evidence[0].value == 3
    (spin,) = findings(diagnosed(stacks((SPINNING, 2))))
    assert spin.mechanism is Mechanism.USER_SPACE_SPIN


def test_a_profile_names_the_pool_by_its_share_of_the_samples() -> None:
    (found,) = findings(diagnosed(stacks((SPINNING, 250), (WORKING, 750), unit="samples")))
    assert found.confidence is Confidence.MEDIUM and found.evidence[0].value == 25.0
    (few,) = findings(diagnosed(stacks((SPINNING, 30), (WORKING, 70), unit="samples")))
    assert few.confidence is Confidence.LOW  # 100 samples: thin
    assert findings(diagnosed(stacks((SPINNING, 150), (WORKING, 850), unit="samples"))) == []  # 15 %: under the bar


def test_an_allocators_lock_is_allocator_contention_with_its_fix() -> None:
    (one,) = findings(diagnosed(stacks((TCMALLOC_LOCK, 1))))
    assert (one.cause, one.mechanism, one.confidence) == (
        Cause.ALLOCATOR_CONTENTION,
        Mechanism.ALLOCATOR_LOCK,
        Confidence.LOW,
    )
    assert "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES" in " ".join(one.fix.steps) and one.collect_next
    (arena,) = findings(diagnosed(stacks((GLIBC_ARENA, 4))))
    assert arena.confidence is Confidence.MEDIUM and "MALLOC_ARENA_MAX" in " ".join(arena.fix.steps)


def test_the_programs_own_lock_is_a_convoy_that_names_its_function() -> None:
    (convoy,) = findings(diagnosed(stacks((MUTEX, 3), (WORKING, 1))))
    assert (convoy.cause, convoy.mechanism) == (Cause.FUTEX_CONTENTION, Mechanism.LOCK_CONVOY)
    assert "update_cache" in convoy.fix.summary and convoy.confidence is Confidence.MEDIUM
    looping = (Frame("__sched_yield", LIBC), Frame("spin", "(program)"))
    assert findings(diagnosed(stacks((looping, 3)))) == []  # a yield loop without a lock is no convoy


def histogram(long: float, short: float) -> WaitHistogram:
    """Waits of 8-16 ms (*long*) and 16-32 us (*short*), as runqlat counts them."""
    return WaitHistogram(((16e-6, 32e-6, short), (8e-3, 16e-3, long)), "process")


def waiting(waits: WaitHistogram, used: float | None, node: NodeView | None = None) -> Facts:
    processes = (ProcessView(pid=11971, comm="duty"),)
    view = WorkloadView(ref=Workload(), runqueue_waits=waits, cpu_used_cores=used, processes=processes)
    return Facts(node=node or NodeView(cpus=2), workloads=(view,))


def test_long_waits_beside_little_cpu_are_saturation_by_other_load() -> None:
    (found,) = diagnose(waiting(histogram(138, 299), 0.062)).findings  # the recorded victim: 32 % of 437 waits
    assert (found.cause, found.mechanism) == (Cause.RUN_QUEUE_SATURATION, Mechanism.OTHER_LOAD)
    assert found.evidence[0].value == round(100 * 138 / 437, 3) and found.collect_next
    holders = NodeView(cpus=2, cpu_holders=(("duty (11971)", 0.19), ("hogs", 0.99), ("qemu", 2.1)))
    (named,) = diagnose(waiting(histogram(138, 299), 0.062, holders)).findings
    assert "hogs, qemu" in named.fix.summary and "duty" not in named.fix.summary and not named.collect_next


def test_other_load_is_not_named_where_the_waits_are_short_its_own_or_the_hypervisors() -> None:
    assert diagnose(waiting(histogram(51, 669), 0.08)).findings == ()  # alone on the shared machine: 7 %
    assert diagnose(waiting(histogram(138, 299), 0.9)).findings == ()  # a busy workload: its own threads may fill it
    stolen = NodeView(cpus=2, cpu=CpuShares(steal=20.0))
    assert diagnose(waiting(histogram(138, 299), 0.062, stolen)).findings == ()
    (unchecked,) = diagnose(waiting(histogram(138, 299), None)).unchecked
    assert isinstance(unchecked, Unchecked) and unchecked.rule is Cause.RUN_QUEUE_SATURATION
    assert diagnose(waiting(histogram(10, 20), 0.062)).findings == ()  # 30 waits: a moment


def test_a_scheduler_traces_long_waits_are_an_observation_of_the_machine() -> None:
    tasks = (TaskDelay("hogs", None, 0.99, 809, 0.0101, 0.093), TaskDelay("sleep", 1, 0.001, 1, 0.05, 0.05))
    (said,) = diagnose(Facts(NodeView(task_delays=tasks), ())).observations
    assert said.topic == "runqueue-delays" and said.summary.startswith("hogs waited 10.1 ms on average")
