"""``perf report --stdio`` (any ``--sort`` of comm, dso and sym; with or without ``--children``; call graphs) and
``perf top`` snapshots, as printed or pasted from the interactive screen (``+`` before each row), and the older
``samples pcnt function DSO`` table of perf 2.6/3.x. From a public thread (facebook/hhvm#5081, rows cut here)::

    Samples: 1K of event 'cycles', Event count (approx.): 1333457052
    +  14.36%  hhvm  [kernel.kallsyms]  [k] get_futex_key
    +  14.18%  hhvm  [kernel.kallsyms]  [k] futex_wake
    +  13.86%  hhvm  [kernel.kallsyms]  [k] futex_wait

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.samples, len(report.rows), report.rows[0].percent, report.rows[0].symbol, report.rows[0].mode)
(1000, 3, 14.36, 'get_futex_key', 'kernel')

Call-graph lines (``|``, ``---``, ``--12.5%--``), ``#`` comments, ``PerfTop:`` headers and separators are read
past; of several ``perf top`` snapshots the last is used; a row cut short (no ``[k]``/``[.]`` and symbol) is
skipped and counted.

Facts (:func:`to_facts`): the workload's on-CPU samples by library and function (``cpu_samples``; each row's self
share of the samples, as a count when the header gives the number of samples, as a percentage otherwise; with
``--children`` the inclusive share too, in the same unit). A
profile says where the CPU time went, not why: the rules name what kind of code is at the top and what to collect.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from agent.diagnosis.facts import CodeShare, NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, stack_classes
from agent.diagnosis.inputs.artifacts.damage import read_past
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import decimal, lines, unquoted

__all__ = ["FORMAT", "PerfReport", "ProfileRow", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "perf report"

_PERCENT = r"\d+(?:[.,]\d+)?%"
_ROW = re.compile(rf"^[+-]?\s*(?P<first>{_PERCENT})\s+(?:(?P<second>{_PERCENT})\s+)?(?P<rest>.*?)\s*$")
_SYMBOL = re.compile(r"^(?P<before>.*?)\s*\[(?P<mode>[k.gus])\]\s+(?P<symbol>\S.*?)\s*$")
_OLD_ROW = re.compile(rf"^(?P<samples>\d+(?:[.,]\d+)?)\s+(?P<percent>{_PERCENT})\s+(?P<symbol>\S+)\s+(?P<dso>\S+)\s*$")
_SAMPLES = re.compile(r"^#?\s*Samples:\s+(?P<count>\d+(?:[.,]\d+)?)(?P<unit>[KMG]?)\s+of event '(?P<event>[^']+)'")
_PERFTOP = re.compile(r"^PerfTop:\s+\d+")
_UNITS = {"": 1, "K": 1_000, "M": 1_000_000, "G": 1_000_000_000}


@dataclass(frozen=True)
class ProfileRow:
    """One row: its share of the samples (self; *children* with ``--children``), who and where."""

    percent: float  # self
    children: float | None
    comm: str | None
    dso: str | None
    symbol: str | None
    mode: str  # "kernel" or "user"
    samples: float | None = None  # the old table prints the count
    callers: tuple[str, ...] = ()  # its call graph's first chain (``-g``), the nearest caller first


@dataclass(frozen=True)
class PerfReport:
    """The rows of one profile (the last ``perf top`` snapshot), the sample count and event, what was skipped."""

    rows: tuple[ProfileRow, ...]
    samples: int | None  # from ``Samples: 1K of event ...`` (rounded as perf prints it)
    event: str | None
    snapshots: int  # perf top screens seen (1 for a report)
    cut_rows: int  # rows without a symbol (a paste cut short)
    skipped: int  # call-graph, comment, header and other lines read past


def _row(text: str) -> ProfileRow | str | None:
    """A row, None when the line is not one, "cut" for a row without its symbol."""
    old = _OLD_ROW.match(text)
    if old and not text.startswith(("+", "-")):
        dso = old["dso"]
        return ProfileRow(
            decimal(old["percent"]),
            None,
            None,
            dso,
            old["symbol"],
            "kernel" if code.is_kernel(dso) else "user",
            samples=decimal(old["samples"]),
        )
    match = _ROW.match(text)
    if match is None:
        return None
    first, second = decimal(match["first"]), match["second"]
    rest = match["rest"]
    # Two percentages are Children and Self (perf's only layout with two), with or without their header line.
    children, percent = (first, decimal(second)) if second is not None else (None, first)
    symbol = _SYMBOL.match(rest)
    if symbol is None:
        return "cut" if rest and not rest.startswith(("|", "-")) else None
    before = symbol["before"].split()
    while before and before[0].isdigit():
        before = before[1:]  # a Samples or Period column (-n, --show-total-period)
    dso = before[-1] if before else None
    comm = " ".join(before[:-1]) or None
    mode = "kernel" if symbol["mode"] == "k" or code.is_kernel(dso) else "user"
    name = symbol["symbol"].split()
    while len(name) > 1 and name[-1] == "-":
        name.pop()  # empty srcline/srcfile columns
    return ProfileRow(percent, children, comm, dso, " ".join(name), mode)


def _looks(text: str) -> tuple[int, int]:
    rows = cut = 0
    for line in lines(text):
        clean = unquoted(line.text)
        found = _row(clean) if clean else None
        if isinstance(found, ProfileRow):
            rows += 1
        elif found == "cut":
            cut += 1
    return rows, cut


def looks_like(text: str) -> bool:
    """True when *text* holds profile rows (``14.36%  hhvm  [kernel.kallsyms]  [k] get_futex_key``)."""
    rows, _cut = _looks(text)
    return rows >= 1


def looks_like_error(text: str) -> bool:
    """perf report's own failures: no samples, a file it cannot read."""
    first = next((unquoted(line.text) for line in lines(text) if line.text.strip()), "")
    return first.startswith(
        ("failed to open perf.data", "The perf.data data has no samples", "The perf.data file has no samples")
    )


def parse(text: str) -> PerfReport:
    """The profile in *text*; raises NotThisFormat (see .errors)."""
    rows: list[ProfileRow] = []
    samples = event = None
    snapshots = 1
    cut = skipped = 0
    seen_top = False
    chain: list[str] = []
    branches = 0

    def close_chain() -> None:
        nonlocal chain, branches
        if chain and rows and not rows[-1].callers:
            rows[-1] = dataclasses.replace(rows[-1], callers=_callers(rows[-1], chain))
        chain, branches = [], 0

    for line in lines(text):
        clean = unquoted(line.text)
        if not clean:
            close_chain()
            continue
        if rows and (graph := _graph_symbol(line.text.lstrip(">").rstrip())) is not None:
            symbol, branch = graph
            branches += branch
            if symbol and branches <= 1:  # the first branch: the commonest path
                chain.append(symbol)
            skipped += 1
            continue
        close_chain()
        if (header := _SAMPLES.match(clean)) is not None:
            samples = round(decimal(header["count"]) * _UNITS[header["unit"]])
            event = header["event"]
            continue
        if clean.lstrip("# ").startswith("Children"):
            skipped += 1
            continue
        if _PERFTOP.match(clean):
            # A new screen: what came before was an older snapshot (or the part of one a paste kept).
            snapshots += 1 if seen_top or rows else 0
            seen_top = True
            skipped += len(rows)
            rows = []
            continue
        found = _row(clean)
        if isinstance(found, ProfileRow):
            rows.append(found)
        elif found == "cut":
            cut += 1
        else:
            skipped += 1
    close_chain()
    if not rows:
        raise NotThisFormat(FORMAT, "no profile rows (`12.34%  comm  dso  [k] symbol`)")
    return PerfReport(tuple(rows), samples, event, snapshots, cut, skipped)


_BRANCH = re.compile(r"^[|\s]*(?:--\d+(?:[.,]\d+)?%--|---)")
_ROOTS = re.compile(r"^(?:entry_SYSCALL|entry_SYSENTER|start_thread|clone3?$|__clone|_start$|__libc_start|main$|"
                    r"ret_from_fork|secondary_startup|cpu_startup_entry|start_kernel)")  # fmt: skip


def _graph_symbol(text: str) -> tuple[str | None, int] | None:
    """(the symbol of a call-graph line, 1 when it opens a branch) or None when *text* is no call-graph line."""
    stripped = text.strip()
    if (
        not stripped
        or _ROW.match(stripped)
        or _OLD_ROW.match(stripped)
        or _SAMPLES.match(stripped)
        or stripped[0] == "#"
    ):
        return None
    opens = _BRANCH.match(stripped)
    rest = stripped[opens.end() :] if opens else stripped.lstrip("| ")
    if not (stripped.startswith(("|", "-")) or opens or text.startswith(" " * 8)):
        return None
    rest = rest.strip().lstrip("|").strip()
    return (rest.split(" ", 1)[0] or None, 1 if opens else 0)


def _callers(row: ProfileRow, chain: list[str]) -> tuple[str, ...]:
    """The chain as callers of *row*, the nearest first: perf prints it from the caller down or from the callee up
    (``-g caller``/``callee``); a chain that starts at a root (a system call's entry, start_thread) is reversed."""
    found = [symbol for symbol in chain if symbol != row.symbol]
    if found and _ROOTS.match(found[0]):
        found.reverse()
    return tuple(found)


def to_facts(report: PerfReport, source: str) -> Part:
    """The workload's on-CPU samples by library and function, busiest first."""
    scale = report.samples / 100 if report.samples else 1.0
    merged: dict[tuple[str, str | None, str], float] = {}
    inclusive: dict[tuple[str, str | None, str], float] = {}
    for row in report.rows:
        key = (code.library(row.dso) if row.dso else (code.KERNEL if row.mode == "kernel" else code.UNKNOWN),
               code.function(row.symbol), row.mode)  # fmt: skip
        count = row.samples if row.samples is not None else row.percent * scale
        merged[key] = merged.get(key, 0.0) + count
        if row.children is not None:
            inclusive[key] = inclusive.get(key, 0.0) + row.children * scale
    shares = tuple(
        CodeShare(library, function, mode, count, inclusive=inclusive.get((library, function, mode)))
        for (library, function, mode), count in sorted(merged.items(), key=lambda item: -item[1])
    )
    notes = ["a profile tells where on-CPU time went, not how long the workload ran nor why"]
    if report.samples is None and all(row.samples is None for row in report.rows):
        notes.append(f"{source}: no sample count printed: the rows' percentages stand for samples")
    if report.snapshots > 1:
        notes.append(f"{source}: {report.snapshots} perf top screens: the last is read")
    notes += read_past(
        source,
        (report.cut_rows, "row(s) cut short (no symbol) were skipped"),
        (report.skipped, "lines that are not profile rows (headers, call graphs) were skipped"),
    )
    total: float | None = float(report.samples) if report.samples else 100.0  # percentages are of all samples
    counted = next((row for row in report.rows if row.samples is not None and row.percent > 0), None)
    if counted is not None and counted.samples is not None:
        total = counted.samples * 100 / counted.percent  # the old table: counts and their shares
    graphs = [row for row in report.rows if row.callers]
    stacks = None
    if graphs:
        stacks = stack_classes.classify(
            (stack_classes.Counted(_frames(row), row.samples if row.samples is not None else row.percent * scale)
             for row in report.rows),
            "profile rows",
        )  # fmt: skip
    workload = WorkloadView(ref=Workload(), cpu_samples=shares, cpu_samples_total=total, stacks=stacks)
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))


def _frames(row: ProfileRow) -> tuple[Frame, ...]:
    """A row and its callers as a stack, innermost first; the callers' libraries are not printed in a call graph."""
    library = code.library(row.dso) if row.dso else (code.KERNEL if row.mode == "kernel" else code.UNKNOWN)
    kernel = row.mode == "kernel"
    frames = [Frame(code.function(row.symbol), library)]
    for symbol in row.callers:
        kernel = kernel and not _USER_ROOT.match(symbol)
        frames.append(
            Frame(code.function(symbol), code.KERNEL if kernel and _KERNELISH.match(symbol) else code.UNKNOWN)
        )
    return tuple(frames)


_KERNELISH = re.compile(r"^(?:__x64_sys_|__se_sys_|__do_sys_|do_|entry_|__schedule|schedule|futex_|sys_|"
                        r"exc_|asm_|handle_|__handle|el0_)")  # fmt: skip
_USER_ROOT = re.compile(r"^(?:__GI_|__libc_|syscall$|__sched_yield|pthread_)")
