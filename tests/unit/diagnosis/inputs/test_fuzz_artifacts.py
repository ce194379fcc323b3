"""The offline formats and the stack classifier, fuzzed with hypothesis: on mutations of real fixtures (rows cut,
duplicated, bytes flipped) and on arbitrary text, each format's parser returns its records or raises its documented
error (an ArtifactError), never another exception, and its conversion to facts never raises; the stack classifier
sorts any frames into groups whose weights add up to what it was given."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.diagnosis.inputs.artifacts import formats
from agent.diagnosis.inputs.artifacts.errors import ArtifactError
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.stack_classes import Counted, classify
from agent.diagnosis.inputs.artifacts.text import decode
from tests.unit.locations import UNIT_FIXTURES
from tests.unit.test_fuzz import mutated

FIXTURES = UNIT_FIXTURES / "artifacts"
FUZZ = settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
# The new parsers of issue 34 and the table parsers that now skip a damaged row instead of refusing the file
PREFIXES = {
    "latency histograms": ("*_hist_*",),
    "gdb info threads": ("*gdb*threads*",),
    "perf sched": ("*perf_sched*",),
    "perf lock": ("*perf_lock*",),
    "py-spy top": ("*pyspy_top*",),
    "/proc/interrupts": ("*proc_interrupts*",),
    "perf trace -s": ("*perf_trace_s*",),
    "strace -c": ("*strace_fc*",),
    "top": ("*top_b*",),
    "pidstat": ("*pidstat_t*",),
    "mpstat": ("*mpstat*",),
    "vmstat": ("*_vmstat.txt",),
    "stacks": ("*_stacks_*",),
}


def seeds(patterns: tuple[str, ...]) -> list[bytes]:
    found = [path.read_bytes() for pattern in patterns for path in sorted(FIXTURES.glob(pattern))]
    assert found, patterns
    return found


@pytest.mark.parametrize("name", list(PREFIXES))
def test_a_damaged_paste_is_read_or_refused_with_its_own_error(name: str) -> None:
    (row,) = [fmt for fmt in formats.FORMATS if fmt.name == name]

    @FUZZ
    @given(st.one_of(mutated(seeds(PREFIXES[name])), st.binary(max_size=400)))
    def check(raw: bytes) -> None:
        text = decode(raw)
        try:
            records = row.parse(text)
        except ArtifactError:
            return
        row.to_facts(records, "fuzzed.txt")

    check()


def frames() -> st.SearchStrategy[Frame]:
    names = st.sampled_from([
        "__sched_yield", "sched_yield", "__lll_lock_wait", "__lll_lock_wait_private", "pthread_cond_wait",
        "pthread_mutex_lock", "_int_free", "malloc", "SpinLockDelay", "tcmalloc::CentralFreeList::InsertRange",
        "blas_thread_server", "inner_thread", "gomp_barrier_wait_end", "__kmp_wait_4", "take_gil", "epoll_wait",
        "nanosleep", "futex_wait", "do_sched_yield", "preempt_schedule_irq", "shrink_node", "exc_page_fault",
        "default_idle", "main", "worker", "update_cache", "acquire", "wait",
    ])  # fmt: skip
    libraries = st.sampled_from([
        "libc.so.6", "libpthread.so.0", "libopenblasp-r0.3.21.so", "libgomp.so.1", "libiomp5.so", "libtcmalloc.so.4",
        "libjemalloc.so.2", "libpython3.11.so", "[kernel]", "(program)", "(unknown)", "threading.py", "app.py",
    ])  # fmt: skip
    return st.builds(
        Frame, st.one_of(st.none(), names, st.text(max_size=30)), st.one_of(libraries, st.text(max_size=20))
    )


@FUZZ
@given(
    st.lists(
        st.builds(
            Counted,
            st.lists(frames(), max_size=12).map(tuple),
            st.floats(min_value=0, max_value=1e6, allow_nan=False),
            st.one_of(st.none(), st.integers(0, 50)),
        ),
        max_size=30,
    ),
    st.sampled_from(["threads", "samples", "calls", "off-CPU seconds"]),
)
def test_the_stack_classifier_sorts_any_frames_into_groups_that_add_up(stacks: list[Counted], unit: str) -> None:
    found = classify(stacks, unit)
    given_weight = sum(stack.weight for stack in stacks if stack.frames)
    if not any(stack.frames for stack in stacks):
        assert found is None
        return
    assert found is not None and found.unit == unit
    assert math.isclose(sum(group.weight for group in found.groups), given_weight, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(found.total, given_weight, rel_tol=1e-9, abs_tol=1e-9)
    weights = [group.weight for group in found.groups]
    assert weights == sorted(weights, reverse=True)
    for group in found.groups:
        assert group.owner in ("pool", "allocator", "program", "runtime", "kernel", "unknown")
        assert (group.implementation is not None) == (group.owner in ("pool", "allocator"))
