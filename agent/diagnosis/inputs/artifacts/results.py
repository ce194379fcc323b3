"""What the parsers return: plain frozen records of what each tool printed, nothing inferred.

Times keep the unit the tool printed them in (named in the field), so a reader can check a value against
the artifact by eye. A value the tool did not print is None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SyscallStat:
    """One system call's row in a ``perf trace -s`` or ``strace -c`` table.

    perf prints total/min/avg/max in milliseconds and stddev in percent of the mean; strace prints the total in
    seconds (converted here to ms), the mean in microseconds (``usecs/call``, converted to ms) and the share of
    the traced time (``% time``). Fields a tool does not print are None.
    """

    name: str
    calls: int
    total_ms: float
    avg_ms: float | None
    errors: int | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    stddev_percent: float | None = None
    time_percent: float | None = None


@dataclass(frozen=True)
class ThreadSyscalls:
    """One thread's block of a ``perf trace -s`` summary (``python (2847), 10240661 events, 6.0%``).

    *comm* is the name exactly as printed (perf may print it cut, e.g. ``ython``); None for a summary without
    per-thread blocks.
    """

    comm: str | None
    tid: int | None
    events: int | None
    events_percent: float | None
    syscalls: tuple[SyscallStat, ...]
    majfaults: int | None = None  # printed with perf trace -F
    minfaults: int | None = None
    runtime_ms: float | None = None  # printed with perf trace --sched

    def syscall(self, name: str) -> SyscallStat | None:
        """The row for system call *name*, None when this thread made none."""
        return next((stat for stat in self.syscalls if stat.name == name), None)


@dataclass(frozen=True)
class PerfTraceSummary:
    """A ``perf trace -s`` summary: one block per thread, in the order printed."""

    threads: tuple[ThreadSyscalls, ...]
    errors_column: bool  # newer perf prints an errors column; the seed's older perf does not
    lost_events: int  # sum of the "LOST N events!" lines: perf dropped that many events, its counts are low

    def thread(self, tid: int) -> ThreadSyscalls | None:
        """The block of thread *tid*, None if absent."""
        return next((thread for thread in self.threads if thread.tid == tid), None)


@dataclass(frozen=True)
class StraceTable:
    """One ``strace -c`` table; strace prints one per personality (``System call usage summary for 32 bit mode``).

    ``strace -c -w`` prints the same table with wall-clock instead of system CPU time; the table does not say
    which, so :attr:`total` and the rows cannot tell either.
    """

    personality: str | None
    syscalls: tuple[SyscallStat, ...]
    total: SyscallStat | None

    def syscall(self, name: str) -> SyscallStat | None:
        """The row for system call *name*, None when it was not called."""
        return next((stat for stat in self.syscalls if stat.name == name), None)


@dataclass(frozen=True)
class StraceSummary:
    """A ``strace -c`` report (``-f`` sums every traced thread and process into one table)."""

    tables: tuple[StraceTable, ...]
    attached: tuple[int, ...]  # pids named in "strace: Process N attached" lines (strace -p)

    @property
    def main(self) -> StraceTable:
        """The first (for most programs the only) table."""
        return self.tables[0]


@dataclass(frozen=True)
class CpuStates:
    """CPU time shares in percent, as ``top`` prints them (``52.0 us, 43.1 sy, ...``); absent states are None."""

    us: float | None
    sy: float | None
    ni: float | None
    id: float | None
    wa: float | None
    hi: float | None
    si: float | None
    st: float | None


@dataclass(frozen=True)
class TaskCounts:
    """``Tasks:`` (or, with ``top -H``, ``Threads:``) line of ``top``; counts it does not print are None.

    Newer procps-ng splits sleeping tasks into ``sleep`` and ``d-sleep`` (uninterruptible).
    """

    total: int
    running: int
    sleeping: int | None
    stopped: int | None
    zombie: int | None
    d_sleep: int | None = None


@dataclass(frozen=True)
class TopRow:
    """One process (or, with ``top -H``, thread) row. *pid* is the thread id in the thread view."""

    pid: int
    user: str | None
    state: str | None
    cpu_percent: float | None
    mem_percent: float | None
    time: str | None
    command: str | None


@dataclass(frozen=True)
class TopSnapshot:
    """One refresh of ``top``: its summary area and its rows."""

    time: str | None
    uptime: str | None
    users: int | None
    load_average: tuple[float, float, float] | None
    tasks: TaskCounts | None
    threads_view: bool  # "Threads:" instead of "Tasks:": top -H, one row per thread
    cpu: CpuStates | None
    per_cpu: tuple[tuple[str, CpuStates], ...]  # "%Cpu0 : ..." lines when top shows each CPU
    columns: tuple[str, ...]
    rows: tuple[TopRow, ...]


@dataclass(frozen=True)
class TopReport:
    """A ``top`` paste: one snapshot per refresh (``top -b -n 2`` gives two; the second is the one over an interval)."""

    snapshots: tuple[TopSnapshot, ...]


@dataclass(frozen=True)
class SystemLine:
    """The first line of sysstat's tools: ``Linux 6.18.44 (vm)  12/01/2026  _x86_64_  (2 CPU)``."""

    kernel: str
    host: str
    date: str
    arch: str
    cpus: int | None


@dataclass(frozen=True)
class PidstatRow:
    """One row of ``pidstat`` (``-t`` adds threads: a row for each process and one per thread, ``|__name``).

    *time* is 24-hour ``HH:MM:SS`` (AM/PM converted); None on the ``Average:`` rows. With ``-t``, a process row
    has *tgid* and no *tid*, a thread row has *tid* and no *tgid*; without ``-t`` only *pid* is set. Columns
    absent from the table that held the row (``pidstat -w`` prints switches in a table of their own) are None.
    """

    time: str | None
    average: bool
    uid: int | None
    user: str | None
    pid: int | None
    tgid: int | None
    tid: int | None
    usr: float | None
    system: float | None
    guest: float | None
    wait: float | None
    cpu_percent: float | None
    cpu: int | None
    cswch_per_s: float | None
    nvcswch_per_s: float | None
    command: str

    @property
    def is_thread(self) -> bool:
        """True for a thread row of ``pidstat -t`` (printed ``|__name``)."""
        return self.tid is not None and self.tgid is None


@dataclass(frozen=True)
class PidstatReport:
    """A ``pidstat`` report: every row of every table, in the order printed."""

    system: SystemLine | None
    rows: tuple[PidstatRow, ...]

    def averages(self) -> tuple[PidstatRow, ...]:
        """The ``Average:`` rows (pidstat prints them when it was given a count)."""
        return tuple(row for row in self.rows if row.average)


@dataclass(frozen=True)
class MpstatRow:
    """One CPU's row of ``mpstat -P ALL`` (*cpu* is ``all`` or the CPU number); shares in percent."""

    time: str | None
    average: bool
    cpu: str
    usr: float | None
    nice: float | None
    sys: float | None
    iowait: float | None
    irq: float | None
    soft: float | None
    steal: float | None
    guest: float | None
    gnice: float | None
    idle: float | None


@dataclass(frozen=True)
class MpstatReport:
    """An ``mpstat`` report: every CPU row, in the order printed."""

    system: SystemLine | None
    rows: tuple[MpstatRow, ...]

    def averages(self) -> tuple[MpstatRow, ...]:
        """The ``Average:`` rows."""
        return tuple(row for row in self.rows if row.average)


@dataclass(frozen=True)
class VmstatRow:
    """One line of ``vmstat``: run queue, blocked, interrupts and context switches per second, CPU shares.

    The first line vmstat prints averages since boot (*since_boot*); the others cover one interval each.
    """

    since_boot: bool
    r: int
    b: int
    interrupts: int
    cs: int
    us: int
    sy: int
    id: int
    wa: int
    st: int | None
    gu: int | None  # guest time, procps-ng 4 and newer
    timestamp: str | None  # vmstat -t


@dataclass(frozen=True)
class VmstatReport:
    """A ``vmstat`` report."""

    rows: tuple[VmstatRow, ...]
