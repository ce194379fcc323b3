"""The rows of `schedwatch top`: one per workload, and on request one per process under it, from two readings
of schedwatch's series (agent/series/).

Pure: rows() turns two readings into rates over the time between them. A column whose series is absent from the
later reading is None (shown "-"), never 0: 0 means the series is there and did not move. A process row reads the
agent's per-process series (the --process-top-k most active processes): they have no CPU, limit, throttling,
run-queue histogram, threads or findings, so those cells are "-".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agent import metrics
from agent.identity.filter import Filter
from agent.identity.workload import Workload
from agent.metrics import MetricSpec
from agent.series.reading import Process, Reading, Totals
from agent.series.schema import PART

HOLDERS = ("self", "other", "kernel")
TOP_FAMILIES = 1  # system-call families named in the system column
EVERYTHING = Filter()


@dataclass(frozen=True)
class Row:
    """One workload over the window; None where its source gives nothing."""

    ref: Workload
    name: str
    pid: int | None = None  # a process row's process; None for the workload's own row
    cpu_cores: float | None = None  # user + system, in CPUs
    limit_cores: float | None = None
    system_share: float | None = None  # 0..1 of cpu
    families: tuple[tuple[str, float], ...] = ()  # top families by calls, share 0..1 of all the calls
    waiting_cores: float | None = None  # summed over threads: CPUs' worth of waiting for a CPU
    waiting_by_holder: dict[str, float] | None = None  # holder -> CPUs' worth of waiting
    throttled_cores: float | None = None
    blocked_by_state: dict[str, float] | None = None  # state -> threads' worth of blocked time
    yields_per_second: float | None = None
    futex_per_second: float | None = None
    runqueue_p99_seconds: float | None = None
    threads: int | None = None
    finding: str | None = None


def _delta(before: Totals | None, after: Totals, spec: MetricSpec, part: str = "") -> float | None:
    value = after.count(spec, part)
    if value is None:
        return None
    earlier = before.count(spec, part) if before is not None else None  # a new workload's counters start at 0
    return max(value - (earlier or 0.0), 0.0)  # a restarted agent: no negative rates


def _split(before: Totals | None, after: Totals, spec: MetricSpec) -> dict[str, float] | None:
    parts = after.parts(spec)
    if not parts:
        return None
    return {part: _delta(before, after, spec, part) or 0.0 for part in parts}


def _findings(totals: Totals) -> list[str]:
    """The causes the agent's standing findings name for the workload now."""
    found = totals.gauges.get(metrics.FINDING.name, {})
    return [part.split(PART, 1)[0] for part, value in found.items() if value == 1]


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float | None:
    """The q-quantile of the waits between two readings of a cumulative histogram, interpolated linearly inside
    a bucket as PromQL's histogram_quantile; None without waits. The +Inf bucket answers its lower bound."""
    bounds = sorted(after)
    if not bounds or bounds[-1] != math.inf:
        return None
    counts = [max(after[bound] - before.get(bound, 0.0), 0.0) for bound in bounds]
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if bound == math.inf:
                return lower
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = bound, count
    return lower


def row(ref: Workload, before: Totals | None, after: Totals, seconds: float, process: Process | None = None) -> Row:
    """One workload's row over *seconds*, or one of its *process*'s."""

    def rate(spec: MetricSpec, part: str = "") -> float | None:
        value = _delta(before, after, spec, part)
        return None if value is None else value / seconds

    user, system = rate(metrics.CPU_USAGE_SECONDS, "user"), rate(metrics.CPU_USAGE_SECONDS, "system")
    cpu = None if user is None and system is None else (user or 0.0) + (system or 0.0)
    share = (system or 0.0) / cpu if cpu else (0.0 if cpu == 0.0 else None)
    by_family = _split(before, after, metrics.SYSCALLS)  # calls: counted for every workload, timed only for a few
    families: tuple[tuple[str, float], ...] = ()
    if by_family and sum(by_family.values()) > 0:
        total = sum(by_family.values())
        ranked = sorted(by_family.items(), key=lambda item: (-item[1], item[0]))[:TOP_FAMILIES]
        families = tuple((name, value / total) for name, value in ranked if value > 0)
    holders = _split(before, after, metrics.RUNQUEUE_WAIT_BY_HOLDER_SECONDS)
    blocked = _split(before, after, metrics.BLOCKED_SECONDS)
    futex = _split(before, after, metrics.FUTEX_CALLS)
    threads = after.gauge(metrics.THREADS)
    findings = _findings(after)
    return Row(
        ref=ref,
        name=ref.name if process is None else f"{process.pid} {process.comm}",
        pid=None if process is None else process.pid,
        cpu_cores=cpu,
        limit_cores=after.gauge(metrics.CPU_LIMIT_CORES),
        system_share=share,
        families=families,
        waiting_cores=rate(metrics.RUNQUEUE_WAIT_SECONDS),
        waiting_by_holder=None if holders is None else {key: value / seconds for key, value in holders.items()},
        throttled_cores=rate(metrics.CPU_THROTTLED_SECONDS),
        blocked_by_state=None if blocked is None else {key: value / seconds for key, value in blocked.items()},
        yields_per_second=rate(metrics.SCHED_YIELD_CALLS),
        futex_per_second=None if futex is None else sum(futex.values()) / seconds,
        runqueue_p99_seconds=quantile(
            0.99,
            before.histogram(metrics.RUNQUEUE_LATENCY) if before else {},
            after.histogram(metrics.RUNQUEUE_LATENCY),
        ),
        threads=None if threads is None else int(threads),
        finding=", ".join(sorted(set(findings))) or None,
    )


def _seconds(before: Reading, after: Reading) -> float:
    seconds = after.at - before.at
    if seconds <= 0:
        raise ValueError(f"readings {seconds:g} s apart: the later must come after the earlier")
    return seconds


def rows(before: Reading, after: Reading, wanted: Filter = EVERYTHING) -> list[Row]:
    """The rows of every workload of *after* that *wanted* matches, over the time between the readings."""
    seconds = _seconds(before, after)
    return [
        row(ref, before.workloads.get(ref), totals, seconds)
        for ref, totals in after.workloads.items()
        if wanted.matches(ref)
    ]


def process_rows(before: Reading, after: Reading, wanted: Filter = EVERYTHING) -> list[Row]:
    """The rows of every process *after* has series of, in a workload *wanted* matches (a process that was not
    exported at *before* counts from 0: the agent exports a process from its first event on)."""
    seconds = _seconds(before, after)
    return [
        row(process.ref, before.processes.get(process), totals, seconds, process)
        for process, totals in after.processes.items()
        if wanted.matches(process.ref)
    ]


@dataclass(frozen=True)
class Column:
    """A column of the table: its header, the key that sorts by it, and how to get its number from a row."""

    header: str
    key: str  # the key press (and --sort name's first letter)
    name: str  # --sort NAME
    value: Callable[[Row], float | str | None]


def _holder(name: str) -> Callable[[Row], float | None]:
    return lambda r: None if r.waiting_by_holder is None else r.waiting_by_holder.get(name)


def _blocked(r: Row) -> float | None:
    return None if r.blocked_by_state is None else sum(r.blocked_by_state.values())


COLUMNS: tuple[Column, ...] = (
    Column("WORKLOAD", "n", "name", lambda r: r.name),
    Column("CPU", "c", "cpu", lambda r: r.cpu_cores),
    Column("SYS%", "s", "system", lambda r: r.system_share),
    Column("WAIT", "w", "wait", lambda r: r.waiting_cores),
    Column("W:SELF", "1", "wait-self", _holder("self")),
    Column("W:OTHER", "2", "wait-other", _holder("other")),
    Column("W:KERN", "3", "wait-kernel", _holder("kernel")),
    Column("THROT", "t", "throttled", lambda r: r.throttled_cores),
    Column("BLOCKED", "b", "blocked", _blocked),
    Column("YIELD/s", "y", "yields", lambda r: r.yields_per_second),
    Column("FUTEX/s", "f", "futex", lambda r: r.futex_per_second),
    Column("RQ p99", "r", "p99", lambda r: r.runqueue_p99_seconds),
    Column("THR", "h", "threads", lambda r: r.threads),
    Column("FINDING", "x", "finding", lambda r: r.finding),
)
BY_NAME = {column.name: column for column in COLUMNS}
BY_KEY = {column.key: column for column in COLUMNS}


def sorted_rows(table: Iterable[Row], by: Column) -> list[Row]:
    """*table* by *by*: numbers largest first, names A to Z; unknown ("-") last, ties by name."""
    known: list[tuple[float | str, Row]] = []
    unknown: list[Row] = []
    for item in table:
        value = by.value(item)
        (unknown.append(item) if value is None else known.append((value, item)))
    if by.name in ("name", "finding"):
        known.sort(key=lambda pair: (str(pair[0]), pair[1].name))
    else:
        known.sort(key=lambda pair: (-float(pair[0]), pair[1].name))
    return [item for _value, item in known] + sorted(unknown, key=lambda item: item.name)


def nested(workloads: Iterable[Row], processes: Iterable[Row], by: Column) -> list[Row]:
    """*workloads* sorted by *by*, each followed by its own *processes*, sorted by *by* too."""
    under: dict[Workload, list[Row]] = {}
    for item in processes:
        under.setdefault(item.ref, []).append(item)
    out = []
    for item in sorted_rows(workloads, by):
        out.append(item)
        out += sorted_rows(under.get(item.ref, ()), by)
    return out


def cells(r: Row) -> list[str]:
    """The row's cells as text, in COLUMNS order; "-" for unknown."""

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    cpu = num(r.cpu_cores, ".2f")
    if r.cpu_cores is not None and r.limit_cores is not None:
        cpu += f"/{r.limit_cores:g}"
    system = "-" if r.system_share is None else f"{r.system_share * 100:.0f}%"
    if r.families:
        system += " " + ",".join(f"{name}:{share * 100:.0f}%" for name, share in r.families)
    p99 = "-" if r.runqueue_p99_seconds is None else f"{r.runqueue_p99_seconds * 1000:.2f}ms"
    threads = "-" if r.threads is None else str(r.threads)
    if r.threads is not None and r.limit_cores is not None:
        threads += f"/{r.limit_cores:g}"  # threads against the CPUs the workload may use
    return [
        r.name if r.pid is None else f"  {r.name}",
        cpu,
        system,
        num(r.waiting_cores, ".2f"),
        num(_holder("self")(r), ".2f"),
        num(_holder("other")(r), ".2f"),
        num(_holder("kernel")(r), ".2f"),
        num(r.throttled_cores, ".2f"),
        num(_blocked(r), ".2f"),
        num(r.yields_per_second, ".0f"),
        num(r.futex_per_second, ".0f"),
        p99,
        threads,
        r.finding or "-",
    ]
