"""The one table of the formats schedwatch reads from saved files, and the detection that reads it.

Each row names a format, the command that makes it, and its module's functions: whether a text looks like its
report (``looks_like``) or like its tool's own error message (``looks_like_error``), the parser (text -> frozen
records of what the tool printed, nothing inferred) and the conversion of those records to facts. Detection (here)
and conversion (:mod:`.load`) both read this table and nothing else: adding a format is one module and one row.

The format is decided by the content, never by the file's name: the first row whose report the text looks like,
or, failing that, the first whose error message it looks like. A text no row claims gets :class:`UnknownFormat`,
whose message (:func:`unknown_format_message`) names every row's command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from agent.diagnosis.facts import Facts
from agent.diagnosis.inputs.artifacts import (
    backtrace,
    bcc_stacks,
    bpftrace_maps,
    cgroup_cpu,
    clocksource,
    folded,
    gdb_threads,
    histograms,
    mpstat,
    perf_lock,
    perf_report,
    perf_sched,
    perf_script,
    perf_stat,
    perf_trace,
    pidstat,
    pressure,
    proc_interrupts,
    proc_sched,
    proc_softirqs,
    proc_stat,
    proc_status,
    proc_vmstat,
    pyspy_dump,
    pyspy_top,
    saved_report,
    strace,
    time_output,
    top,
    vmstat,
)
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part

Record = TypeVar("Record")


class FormatModule(Protocol[Record]):
    """What the module of a format provides; mypy checks each row's module against it."""

    FORMAT: str  # the format's name

    def looks_like(self, text: str) -> bool:
        """Whether *text* holds this format's report."""

    def looks_like_error(self, text: str) -> bool:
        """Whether *text* is, instead of a report, the tool's own error message."""

    def parse(self, text: str) -> Record:
        """*text* -> the records of what the tool printed; raises NotThisFormat, CommandFailed or Malformed."""

    def to_facts(self, records: Record, source: str) -> Part | Facts:
        """The records -> the facts they tell (*source*: the file's name, for the sources)."""


@dataclass(frozen=True)
class Format(Generic[Record]):
    """One row of the table: a format's name, the command that makes it, and its module's functions.

    *to_facts* turns the parsed records (and the file's name, for the sources) into a :class:`~.part.Part`, which
    :func:`~.merge.merge` combines with the other files of its environment, or, for a saved schedwatch report, into
    the :class:`~agent.diagnosis.facts.Facts` of a whole environment, which stands alone.
    """

    name: str  # as errors, notes and the report's sources name it ("perf trace -s"); the Part's kind
    command: str  # what a user runs to make it, as the unknown-format message lists it
    looks_like: Callable[[str], bool]
    looks_like_error: Callable[[str], bool]
    parse: Callable[[str], Record]
    to_facts: Callable[[Record, str], Part | Facts]


def row(module: FormatModule[Record], command: str) -> Format[Any]:
    """The row of the format that *module* reads, made by *command*; mypy checks its parser and conversion agree."""
    return Format(module.FORMAT, command, module.looks_like, module.looks_like_error, module.parse, module.to_facts)


# Every fixture and a saved report are claimed by one row only (tests/unit/diagnosis/inputs/test_artifact_formats.py),
# so the order decides nothing but the order the unknown-format message lists the commands in.
FORMATS: tuple[Format[Any], ...] = (
    row(perf_trace, "perf trace -s"),
    row(strace, "strace -c (-f, -w)"),
    row(top, "top -b (-H), or a top screen"),
    row(pidstat, "pidstat -t"),
    row(mpstat, "mpstat -P ALL"),
    row(vmstat, "vmstat"),
    row(perf_stat, "perf stat (-p, -t, -a)"),
    row(time_output, "time (bash, zsh, /usr/bin/time -v, IPython %time)"),
    row(perf_report, "perf report --stdio (--children, --sort comm,dso,sym), or a perf top screen"),
    row(backtrace, "gdb -p PID -batch -ex 'thread apply all bt' (or gstack PID), or backtrace_symbols frames"),
    row(gdb_threads, "gdb -p PID -batch -ex 'info threads'"),
    row(folded, "folded stacks: perf script | stackcollapse-perf.pl, or py-spy record -f raw"),
    row(perf_script, "perf script (of perf record -g)"),
    row(bcc_stacks, "stackcount-bpfcc or profile-bpfcc (bcc)"),
    row(bpftrace_maps, "bpftrace -e '... { @[ustack, kstack] = count(); }'"),
    row(pyspy_dump, "py-spy dump --pid PID (--native)"),
    row(perf_sched, "perf sched record -- sleep 5; perf sched latency (or timehist)"),
    row(pyspy_top, "py-spy top --pid PID (a screen)"),
    row(perf_lock, "perf lock record -- sleep 5; perf lock contention (or report)"),
    row(histograms, "runqlat-bpfcc -p PID 5 1 (-m, -P), cpudist-bpfcc (-O), or bpftrace runqlat.bt"),
    row(proc_status, "cat /proc/PID/status"),
    row(proc_sched, "cat /proc/PID/sched"),
    row(proc_stat, "cat /proc/stat (twice, 10 s apart)"),
    row(proc_softirqs, "cat /proc/softirqs (twice, 10 s apart)"),
    row(proc_interrupts, "cat /proc/interrupts (twice, 10 s apart)"),
    row(proc_vmstat, "cat /proc/vmstat (twice, 10 s apart)"),
    row(pressure, "cat /proc/pressure/cpu (or a cgroup's cpu.pressure)"),
    row(cgroup_cpu, "cat /sys/fs/cgroup/.../cpu.stat (and cpu.max)"),
    row(clocksource, "dmesg | grep -i clocksource, or cat .../clocksource0/current_clocksource"),
    row(saved_report, "a `schedwatch diagnose --json` report"),
)


class UnknownFormat(NotThisFormat):
    """No known format claims the text."""

    def __init__(self, source: str | None = None) -> None:
        super().__init__("a known tool's", "no known format matches")
        self.args = (unknown_format_message(source),)  # the one line a user sees


def unknown_format_message(source: str | None = None) -> str:
    """One line: *source* (a file name, when given) is in no known format, and the command of every row."""
    commands = [fmt.command for fmt in FORMATS]
    known = "; or ".join(("; ".join(commands[:-1]), commands[-1])) if len(commands) > 1 else commands[0]
    where = f"{source}: " if source else ""
    return f"{where}not output of a tool schedwatch reads; give it the output of one of: {known}"


def detect_format(text: str, source: str | None = None) -> Format[Any]:
    """The format of *text*: the first row whose report (or, failing that, whose error message) it looks like.

    Raises UnknownFormat (a NotThisFormat) naming *source* when none does, the empty text included. A long text
    is judged by its head and tail (a tool's report shows itself there), so that a large file no format claims is
    refused in one pass per format over those, not over all of it.
    """
    sample = text if len(text) <= 2 * SAMPLE_CHARS else f"{_head(text)}\n{_tail(text)}"
    for fmt in FORMATS:
        if fmt.looks_like(sample):
            return fmt
    for fmt in FORMATS:
        if fmt.looks_like_error(sample):
            return fmt
    raise UnknownFormat(source)


SAMPLE_CHARS = 1 << 20  # of a long text's head and of its tail, judged for its format


def _head(text: str) -> str:
    """The first SAMPLE_CHARS of *text*, to the end of a line."""
    cut = text.rfind("\n", 0, SAMPLE_CHARS)
    return text[: cut if cut > 0 else SAMPLE_CHARS]


def _tail(text: str) -> str:
    """The last SAMPLE_CHARS of *text*, from the start of a line."""
    start = text.find("\n", len(text) - SAMPLE_CHARS)
    return text[start + 1 if start >= 0 else len(text) - SAMPLE_CHARS :]


def parse(text: str, source: str | None = None) -> object:
    """*text* parsed by the parser of its format (its records); raises UnknownFormat, CommandFailed or Malformed."""
    return detect_format(text, source).parse(text)
