"""Two environments side by side (``schedwatch compare``): each one's diagnosis, which side is slow (and by how
much, where the inputs tell), the facts that differ, and the sentences that say why the difference explains the gap.
Reads facts and findings; decides no cause itself."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from agent.diagnosis.facts import Facts, ThreadView, WorkloadView
from agent.diagnosis.findings import Cause, Diagnosis, Finding, Mechanism
from agent.diagnosis.inputs.told import Told, with_told
from agent.diagnosis.rules import diagnose
from agent.diagnosis.rules.signals import spinning
from agent.diagnosis.rules.thresholds import DEFAULT

# A thread spinning in sched_yield, as the rules count it without a clock.
SPINNING = (
    f"{DEFAULT.yields_per_thread:,}+ sched_yield calls or {DEFAULT.yield_seconds_per_thread:g}+ s inside sched_yield"
)


# What idle pool threads do instead of sleeping, by the pool finding's mechanism.
IDLE = {
    Mechanism.YIELD_STORM: "spin calling sched_yield instead of sleeping",
    Mechanism.USER_SPACE_SPIN: "spin in user space instead of sleeping",
    Mechanism.FUTEX_HANDOFF: "park and wake on futexes for every chunk of work",
}


@dataclass(frozen=True)
class Difference:
    """One fact in A and in B (None where that side's artifacts do not tell it)."""

    fact: str
    a: float | None
    b: float | None
    unit: str

    @property
    def ratio(self) -> float | None:
        """A / B, None when either is unknown or B is 0."""
        if self.a is None or self.b is None or self.b == 0:
            return None
        return self.a / self.b


# Formats whose window is the wall time of the job they ran (`time CMD`, `perf stat CMD`), and the one other format
# that sets a workload's window (pidstat's interval): with it on a side, that side's window may not be its wall time.
WALL_TIME_KINDS = ("time", "perf stat")
OTHER_WINDOW_KINDS = ("pidstat",)
WOULD_TELL = "`time` (or `perf stat`) of the same job on both sides"


@dataclass(frozen=True)
class Slower:
    """Which side is slow, by how much where both sides' inputs timed the same job, and how that is known."""

    side: str | None  # a_name or b_name; None: the inputs do not tell
    factor: float | None  # its wall time / the other's; None: not timed on both sides
    basis: str  # how it is known, for a person
    would_tell: str  # the inputs that would tell what is not known ("" when nothing is missing)


@dataclass(frozen=True)
class Comparison:
    """A and B, which is slow, what differs, and why it explains the gap; *cause* is the finding that does (None:
    none found)."""

    a_name: str
    b_name: str
    a: Diagnosis
    b: Diagnosis
    differences: tuple[Difference, ...]
    explanation: tuple[str, ...]
    cause: Finding | None
    cause_side: str | None  # a_name or b_name
    slower: Slower = Slower(None, None, "", "")


def main_workload(facts: Facts) -> WorkloadView | None:
    """The workload that yields most (then waits on futexes most, then has most threads)."""
    return max(
        facts.workloads,
        key=lambda w: (w.sched_yield_calls or 0.0, w.futex_wait_seconds or 0.0, w.threads or 0),
        default=None,
    )


def _threads(workload: WorkloadView | None) -> tuple[ThreadView, ...] | None:
    if workload is None or workload.thread_views is None:
        return None
    counted = tuple(thread for thread in workload.thread_views if thread.sched_yield_calls is not None)
    return counted or None


def yielding(threads: tuple[ThreadView, ...]) -> list[ThreadView]:
    """Threads spinning in sched_yield, by the rules' bars."""
    limits = (DEFAULT.yields_per_thread, DEFAULT.yield_seconds_per_thread)
    return [thread for thread in threads if spinning(thread, *limits)]


def parked(threads: tuple[ThreadView, ...]) -> list[ThreadView]:
    """Threads that never yielded and made at most one futex call: parked for the whole trace."""
    return [thread for thread in threads if thread.sched_yield_calls == 0 and (thread.futex_calls or 0) <= 1]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _thread_fact(
    threads: tuple[ThreadView, ...] | None, measure: Callable[[tuple[ThreadView, ...]], float | None]
) -> float | None:
    return None if threads is None else measure(threads)


def _node_share(facts: Facts, name: str) -> float | None:
    return None if facts.node.cpu is None else getattr(facts.node.cpu, name)


def differences(a: Facts, b: Facts) -> tuple[Difference, ...]:
    """The facts that tell the two apart, where at least one side knows them."""
    wa, wb = main_workload(a), main_workload(b)
    ta, tb = _threads(wa), _threads(wb)
    thread_measures: list[tuple[str, str, Callable[[tuple[ThreadView, ...]], float | None]]] = [
        ("threads traced", "threads", lambda ts: float(len(ts))),
        ("threads spinning in sched_yield", "threads", lambda ts: float(len(yielding(ts)))),
        (
            "sched_yield calls per spinning thread (median)",
            "calls",
            lambda ts: _median([float(t.sched_yield_calls or 0) for t in yielding(ts)]),
        ),
        (
            "time in sched_yield per spinning thread (median)",
            "s",
            lambda ts: _median([t.sched_yield_seconds or 0.0 for t in yielding(ts)]),
        ),
        ("threads parked in one futex wait", "threads", lambda ts: float(len(parked(ts)))),
        (
            "longest futex wait",
            "s",
            lambda ts: max((t.futex_max_seconds for t in ts if t.futex_max_seconds is not None), default=None),
        ),
    ]
    found = [
        Difference(fact, _thread_fact(ta, measure), _thread_fact(tb, measure), unit)
        for fact, unit, measure in thread_measures
    ]

    def workload_fact(fact: str, unit: str, read: Callable[[WorkloadView], float | None]) -> None:
        found.append(Difference(fact, None if wa is None else read(wa), None if wb is None else read(wb), unit))

    workload_fact("sched_yield calls, all threads", "calls", lambda w: w.sched_yield_calls)
    workload_fact("time in sched_yield, all threads", "s", lambda w: (w.syscall_seconds or {}).get("sched_yield"))
    workload_fact("time in futex calls, all threads", "s", lambda w: w.futex_wait_seconds)
    workload_fact("sched_yield calls per second", "/s", lambda w: w.rate(w.sched_yield_calls))
    workload_fact("threads blocked in futex waits (average)", "threads", lambda w: w.rate(w.futex_wait_seconds))
    workload_fact("time waiting for a CPU per second", "s/s", lambda w: w.rate(w.runqueue_wait_seconds))
    workload_fact("CPU used", "CPUs", lambda w: w.cpu_used_cores)
    workload_fact("CPUs it may use", "CPUs", lambda w: w.cpus_allowed)
    workload_fact(
        "system share of its CPU time", "%", lambda w: None if w.system_share is None else 100 * w.system_share
    )
    found.append(
        Difference("node CPU time in the kernel (sy)", _node_share(a, "system"), _node_share(b, "system"), "%")
    )
    found.append(Difference("node CPU time in user space (us)", _node_share(a, "user"), _node_share(b, "user"), "%"))
    load_a = a.node.load_average[0] if a.node.load_average else None
    load_b = b.node.load_average[0] if b.node.load_average else None
    found.append(Difference("load average (1 min)", load_a, load_b, "tasks"))
    found.append(Difference("CPUs", _float(a.node.cpus), _float(b.node.cpus), "CPUs"))
    return tuple(difference for difference in found if difference.a is not None or difference.b is not None)


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _pool_finding(diagnosis: Diagnosis) -> Finding | None:
    return next((f for f in diagnosis.findings if f.cause is Cause.THREAD_POOL_OVERSUBSCRIPTION), None)


def _count(value: float) -> str:
    if value >= 1_000_000:
        return f"~{value / 1_000_000:.1f} M"
    return f"{value:,.0f}"


def _thread_story(name: str, threads: tuple[ThreadView, ...] | None) -> str | None:
    if threads is None:
        return None
    spinners, resting = yielding(threads), parked(threads)
    if spinners:
        calls = statistics.median(float(t.sched_yield_calls or 0) for t in spinners)
        seconds = statistics.median(t.sched_yield_seconds or 0.0 for t in spinners)
        story = (
            f"in {name} {len(spinners)} of {len(threads)} traced threads spun in sched_yield "
            f"(median {_count(calls)} calls and {seconds:.1f} s inside the call per thread)"
        )
    else:
        story = f"in {name} none of {len(threads)} traced threads spun in sched_yield ({SPINNING})"
    if resting:
        story += f", and {len(resting)} sat parked in a single futex wait"
    return story


def explain(a_name: str, b_name: str, a: Diagnosis, b: Diagnosis) -> tuple[tuple[str, ...], Finding | None, str | None]:
    """Sentences saying what differs and why it explains the gap, and the finding that names the cause."""
    sentences: list[str] = []
    stories = [
        story
        for story in (
            _thread_story(a_name, _threads(main_workload(a.facts))),
            _thread_story(b_name, _threads(main_workload(b.facts))),
        )
        if story
    ]
    if stories:
        joined = "; ".join(stories)
        sentences.append(joined[0].upper() + joined[1:] + ".")
    found_a, found_b = _pool_finding(a), _pool_finding(b)
    if (found_a is None) != (found_b is None):
        sick, healthy = (a_name, b_name) if found_a else (b_name, a_name)
        finding = found_a or found_b
        assert finding is not None
        healthy_threads = _threads(main_workload((b if found_a else a).facts))
        resting = ", and idle threads sleep in a futex wait" if healthy_threads and parked(healthy_threads) else ""
        idle = IDLE.get(finding.mechanism, "spin instead of sleeping")
        sentences.append(
            f"This is what the same program does when each worker process sizes its BLAS/OpenMP thread pool to the "
            f"CPUs the machine shows: in {sick} the workers' pools together have more threads than there are CPUs, "
            f"so idle pool threads {idle} and take the CPUs from threads with work; "
            f"in {healthy} they do not{resting}."
        )
        cpus_a, cpus_b = a.facts.node.cpus, b.facts.node.cpus
        if cpus_a and cpus_b and cpus_a != cpus_b:
            sentences.append(
                f"{a_name} shows {cpus_a} CPUs and {b_name} {cpus_b}: a pool sized to the CPUs starts {cpus_a} and "
                f"{cpus_b} threads in every worker."
            )
        share = _node_share((a if found_a else b).facts, "system")
        if share is not None and finding.mechanism in (Mechanism.YIELD_STORM, Mechanism.FUTEX_HANDOFF):
            sentences.append(f"That is kernel time: {sick}'s node spent {share:.1f} % of its CPU time in the kernel.")
        return tuple(sentences), finding, sick
    if found_a and found_b:
        sentences.append(
            f"Both {a_name} and {b_name} show oversubscribed thread pools; "
            "the differences below say where the spinning is worse."
        )
        return tuple(sentences), found_a, a_name
    other_a = a.findings[0] if a.findings else None
    other_b = b.findings[0] if b.findings else None
    if (other_a is None) != (other_b is None):
        finding = other_a or other_b
        side = a_name if other_a else b_name
        assert finding is not None
        sentences.append(f"Only {side} has a finding: {finding.cause.value} ({finding.mechanism.value}).")
        return tuple(sentences), finding, side
    if other_a is not None and other_b is not None:
        sentences.append(
            f"Both have findings ({a_name}: {other_a.cause.value}, {b_name}: {other_b.cause.value}); "
            "the differences below say which is worse."
        )
        return tuple(sentences), other_a, a_name
    sentences.append(
        "Neither side shows a contention cause schedwatch knows; the observations and notes below say what the "
        "artifacts show and what to collect next."
    )
    return tuple(sentences), None, None


def wall_time(facts: Facts) -> float | None:
    """The wall time of the job the inputs timed (`time`, `perf stat`), None when they did not (or when another
    window may stand in its place)."""

    def read_by(kinds: tuple[str, ...]) -> bool:
        return any(source.startswith(f"{kind} ") for source in facts.sources for kind in kinds)

    if not read_by(WALL_TIME_KINDS) or read_by(OTHER_WINDOW_KINDS):
        return None
    workload = main_workload(facts)
    return None if workload is None else workload.seconds


def slower(a_name: str, b_name: str, a: Diagnosis, b: Diagnosis, cause_side: str | None) -> Slower:
    """Which side is slow: the one whose timed job took longer, else the one with the cause."""
    wall_a, wall_b = wall_time(a.facts), wall_time(b.facts)
    if wall_a and wall_b and wall_a != wall_b:
        side, factor = (a_name, wall_a / wall_b) if wall_a > wall_b else (b_name, wall_b / wall_a)
        basis = f"its job's wall time: {max(wall_a, wall_b):g} s against {min(wall_a, wall_b):g} s"
        return Slower(side, factor, basis, "")
    if cause_side is not None:
        return Slower(cause_side, None, "the cause is there", WOULD_TELL)
    return Slower(None, None, "neither side shows a cause", WOULD_TELL)


def compare(a_name: str, b_name: str, a: Diagnosis, b: Diagnosis) -> Comparison:
    """The comparison of two diagnosed environments."""
    sentences, cause, side = explain(a_name, b_name, a, b)
    return Comparison(
        a_name, b_name, a, b, differences(a.facts, b.facts), sentences, cause, side, slower(a_name, b_name, a, b, side)
    )


def compare_told(a_name: str, b_name: str, a: Facts, b: Facts, told: Told) -> Comparison:
    """Diagnose and compare two environments; what the user *told* (CPUs, pool workers) describes the side with the
    cause (A when neither has one), which is diagnosed again with it."""
    first = compare(a_name, b_name, diagnose(a), diagnose(b))
    if not told:
        return first
    if first.cause_side == b_name:
        return compare(a_name, b_name, first.a, diagnose(with_told(b, told)))
    return compare(a_name, b_name, diagnose(with_told(a, told)), first.b)
