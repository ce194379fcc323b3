"""Log2 histograms of how long things took, as bcc's tools print them (``runqlat``: run-queue waits; ``cpudist``:
on-CPU slices; ``cpudist -O``: off-CPU time; ``-m`` in milliseconds, ``-P``/``-L`` one per process or thread, ``-T``
a time stamp per interval) and as bpftrace prints a ``hist()`` (``runqlat.bt``: ``[4, 8)  12 |@@@|``). Which tool
made it comes from its banner (``Tracing run queue latency...``) or the pasted command; the window from the
command's interval. From a public thread (iovisor/bcc#585, rows cut here)::

    # ./cpudist.py
    Tracing on-CPU time... Hit Ctrl-C to end.
    ^C
         usecs               : count     distribution
            16 -> 31         : 187      |****************************************|
            32 -> 63         : 89       |*******************                     |

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.tool, report.histograms[0].buckets)
('cpudist', ((1.6e-05, 3.2e-05, 187.0), (3.2e-05, 6.4e-05, 89.0)))

A row cut short, wrapped or garbled is skipped and named (:mod:`.damage`); a histogram cut off is read as far as
it goes and said to be cut; several histograms (intervals, processes) are each read and, for the facts, added up
(said in a note).

Facts (:func:`to_facts`): ``runqlat``'s waits as the workload's run-queue waits when it measured one process
(``-p PID``, or a single ``pid =`` section), else as the node's; ``cpudist``'s as the workload's on-CPU or off-CPU
slices. A histogram whose tool is not told is only noted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, WaitHistogram, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.damage import Damage, notes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import Line, lines, unquoted

__all__ = ["FORMAT", "Histogram", "Histograms", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "latency histograms"

UNITS = {"nsecs": 1e-9, "usecs": 1e-6, "msecs": 1e-3, "secs": 1.0, "us": 1e-6, "ms": 1e-3, "ns": 1e-9}
_HEADER = re.compile(r"^(?P<unit>nsecs|usecs|msecs|secs)\s*:\s*count\s+distribution")
_BCC_ROW = re.compile(r"^(?P<low>\d+)\s*->\s*(?P<high>\d+)\s*:\s*(?P<count>\d+)(?P<bar>\s*\|[*\s]*\|?)?$")
_BT_NAME = re.compile(r"^@(?P<name>\w*):\s*$")
_BT_ROW = re.compile(
    r"^\[(?P<low>\d+[KMG]?)(?:,\s*(?P<high>\d+[KMG]?)\))?\]?\s+(?P<count>\d+)(?P<bar>\s*\|[@\s]*\|?)?$"
)
_SECTION = re.compile(r"^(?P<kind>pid|tid|pidns|cgroup|cpu)\s*=\s*(?P<value>\S+)(?:\s+(?P<name>.+))?$")
_TIME = re.compile(r"^\d\d:\d\d:\d\d$")
_SCRIPT_FILTER = re.compile(r"(?:comm|pid|tgid)\s*==\s*\S")  # a bpftrace script that measured one process
_COMMAND = re.compile(r"(?:^|[\s/#$])(?P<tool>runqlat|cpudist|offcpudist)(?:\.py|\.bt|-bpfcc)?\b(?P<args>.*)$")
_BANNERS = (
    (re.compile(r"^Tracing run queue latency"), "runqlat", None),
    (re.compile(r"^Tracing CPU scheduler"), "runqlat", None),  # runqlat.bt
    (re.compile(r"^Tracing on-CPU time"), "cpudist", False),
    (re.compile(r"^Tracing off-CPU time"), "cpudist", True),
)
_SUFFIX = {"K": 1024, "M": 1024**2, "G": 1024**3}
BT_UNIT = {"usecs": 1e-6, "us": 1e-6, "nsecs": 1e-9, "ns": 1e-9, "msecs": 1e-3, "ms": 1e-3}


@dataclass(frozen=True)
class Histogram:
    """One histogram: ``(from, to, count)`` rows in seconds, the section it belongs to (``pid = 123 comm``) and the
    interval's time stamp, where printed."""

    buckets: tuple[tuple[float, float, float], ...]
    section: str | None = None
    stamp: str | None = None
    cut: bool = False  # the paste ends inside it


@dataclass(frozen=True)
class Histograms:
    """Every histogram of a paste, the tool and command that made them, and the damage read past."""

    tool: str | None  # "runqlat", "cpudist"; None when neither banner nor command says
    off_cpu: bool  # cpudist -O
    command: str | None
    histograms: tuple[Histogram, ...]
    damage: tuple[Damage, ...]
    filtered: bool = False  # the pasted bpftrace script kept one process's tasks (``comm == "x"``, ``pid == N``)

    @property
    def pid(self) -> int | None:
        """The process the tool was pointed at (``-p PID``), where the command tells."""
        found = re.search(r"(?:^|\s)(?:-p|--pid)\s+(\d+)\b", self.command or "")
        return int(found[1]) if found else None

    @property
    def interval(self) -> float | None:
        """Seconds per histogram, from the command's interval argument, where told."""
        if self.command is None:
            return None
        words = [word for word in re.sub(r"(?:-p|--pid|-c|--cgroupmap|--mntnsmap)\s+\S+", "", self.command).split()]
        numbers = [word for word in words if re.fullmatch(r"\d+(?:\.\d+)?", word)]
        return float(numbers[0]) if numbers else None


def _rows(text: str) -> list[Line]:
    return [Line(line.number, " ".join(unquoted(line.text).strip("`").split())) for line in lines(text)]


def _bt_value(token: str) -> float:
    return float(token[:-1]) * _SUFFIX[token[-1]] if token[-1] in _SUFFIX else float(token)


def looks_like(text: str) -> bool:
    """True when *text* holds a log2 histogram: bcc's ``usecs : count distribution`` header with a row after it, or
    bpftrace's ``@name:`` followed by ``[lo, hi) count |@@|`` rows."""
    rows = [row.text for row in _rows(text) if row.text]
    for index, row in enumerate(rows[:-1]):
        if _HEADER.match(row) and _BCC_ROW.match(rows[index + 1]):
            return True
        if _BT_NAME.match(row) and _BT_ROW.match(rows[index + 1]) and "|" in rows[index + 1]:
            return True
    return False


def looks_like_error(text: str) -> bool:
    """bcc's failure to compile or attach (``Exception: Failed to attach``, ``Failed to compile BPF module``)."""
    first = next((row.text for row in _rows(text) if row.text and not row.text.startswith(("#", "$"))), "")
    return first.startswith(("Exception: Failed to attach", "Failed to compile BPF", "could not open bpf map")) and (
        not looks_like(text)
    )


def _tool(rows: list[Line]) -> tuple[str | None, bool, str | None]:
    """(tool, off-CPU, command) from the banner or the pasted command line."""
    tool, off_cpu, command = None, False, None
    for row in rows:
        if (found := _COMMAND.search(row.text)) is not None and command is None and not _BCC_ROW.match(row.text):
            command = found["args"].strip()
            tool = "cpudist" if found["tool"] in ("cpudist", "offcpudist") else found["tool"]
            off_cpu = found["tool"] == "offcpudist" or bool(re.search(r"(?:^|\s)-\w*O", command))
        for banner, name, off in _BANNERS:
            if banner.match(row.text):
                tool = name
                off_cpu = off if off is not None else off_cpu
    return tool, off_cpu, command


def parse(text: str) -> Histograms:
    """The histograms in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no `usecs : count distribution` histogram (bcc) or `[4, 8)  12 |@@|` rows")
    rows = _rows(text)
    tool, off_cpu, command = _tool(rows)
    found: list[Histogram] = []
    damage: list[Damage] = []
    buckets: list[tuple[float, float, float]] = []
    scale: float | None = None
    section = stamp = None
    bpftrace = False

    def close(cut: bool = False) -> None:
        nonlocal buckets
        if buckets:
            found.append(Histogram(tuple(buckets), section, stamp, cut))
        buckets = []

    last = max((index for index, row in enumerate(rows) if row.text), default=-1)
    for index, row in enumerate(rows):
        text_row = row.text
        if not text_row:
            continue
        if (header := _HEADER.match(text_row)) is not None:
            close()
            scale, bpftrace = UNITS[header["unit"]], False
        elif (name := _BT_NAME.match(text_row)) is not None:
            close()
            scale, bpftrace = BT_UNIT.get(name["name"], 1e-6), True
            section = name["name"] or None
        elif _SECTION.match(text_row) is not None:
            close()
            section = text_row
        elif _TIME.match(text_row):
            close()
            stamp = text_row
        elif scale is not None and not bpftrace and (row_match := _BCC_ROW.match(text_row)) is not None:
            low, high, count = int(row_match["low"]), int(row_match["high"]), float(row_match["count"])
            buckets.append((low * scale, (high + 1) * scale, count))
            if row_match["bar"] is None or not row_match["bar"].rstrip().endswith("|"):
                what = f"{low}-{high}: {count:g} kept" if index == last else f"{low}-{high}: {count:g}, bar missing"
                damage.append(Damage(row.number, f"a row cut short ({what})"))
        elif scale is not None and bpftrace and (bt := _BT_ROW.match(text_row)) is not None:
            start = _bt_value(bt["low"])
            end = _bt_value(bt["high"]) if bt["high"] else start + 1
            buckets.append((start * scale, end * scale, float(bt["count"])))
        elif scale is not None and buckets and index == last:
            damage.append(Damage(row.number, "the paste ends inside a row: the histogram read to the row before"))
            close(cut=True)
        elif scale is not None and buckets and re.match(r"^\d", text_row):
            damage.append(Damage(row.number, f"a garbled row skipped ({text_row[:40]!r})"))
        else:
            close()
            scale = None if not text_row.startswith(("avg =", "avg=")) else scale
    close(cut=bool(rows) and last >= 0 and damage != [] and damage[-1].line == rows[last].number)
    script = [row.text for row in rows if "tracepoint:" in row.text or "bpftrace" in row.text]
    filtered = any(_SCRIPT_FILTER.search(row) for row in script)
    return Histograms(tool, off_cpu, command, tuple(found), tuple(damage), filtered)


def _merged(histograms: tuple[Histogram, ...]) -> tuple[tuple[float, float, float], ...]:
    added: dict[tuple[float, float], float] = {}
    for histogram in histograms:
        for low, high, count in histogram.buckets:
            added[(low, high)] = added.get((low, high), 0.0) + count
    return tuple((low, high, count) for (low, high), count in sorted(added.items()))


def to_facts(report: Histograms, source: str) -> Part:
    """Run-queue waits (the workload's or the node's), or the workload's on- and off-CPU slices."""
    sections = {histogram.section for histogram in report.histograms if histogram.section}
    pid_sections = {section for section in sections if section.startswith(("pid", "tid"))}
    one_process = report.pid is not None or len(pid_sections) == 1 or report.filtered
    window = report.interval * len(report.histograms) / max(1, len(sections)) if report.interval else None
    waits = WaitHistogram(_merged(report.histograms), "process" if one_process else "machine", window)
    total = sum(count for _low, _high, count in waits.buckets)
    what = {"runqlat": "run-queue waits", "cpudist": "off-CPU times" if report.off_cpu else "on-CPU slices"}.get(
        report.tool or "", "durations of an unnamed tool"
    )
    said = [f"{source}: {len(report.histograms)} histogram(s) of {what}, {total:g} counted"]
    if len(report.histograms) > 1:
        how = "per process or thread" if sections else "per interval"
        said.append(f"{source}: {len(report.histograms)} histograms ({how}) read and added up into one")
    if window is None:
        said.append(f"{source}: how long the tool ran is not pasted: waits are judged by their length, not per second")
    if any(histogram.cut for histogram in report.histograms):
        said.append(f"{source}: the last histogram is cut: read as far as it goes")
    node = NodeView()
    workload = None
    if report.tool == "runqlat" and one_process:
        workload = WorkloadView(ref=Workload(), runqueue_waits=waits, seconds=window)
    elif report.tool == "runqlat":
        node = NodeView(runqueue_waits=waits)
    elif report.tool == "cpudist" and report.off_cpu:
        workload = WorkloadView(ref=Workload(), offcpu_slices=waits)
    elif report.tool == "cpudist":
        workload = WorkloadView(ref=Workload(), oncpu_slices=waits)
    else:
        said.append(f"{source}: which tool made the histogram is not pasted (its banner or command): not read further")
    return Part(FORMAT, source, node, workload=workload, notes=(*said, *notes(source, report.damage)))
