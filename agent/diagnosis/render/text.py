"""A diagnosis (or a comparison of two) drawn as a top-down tree on a terminal with rich.

``render_text(diagnosis, console)`` draws the node, then the workloads ranked (most contended first) with their
threads, processes, pools and libraries, each workload's findings with the evidence and the fix, the rules that
could not decide and what to collect next, the observations, and what the sources could not tell.
``render_comparison_text(comparison, console)`` draws A and B side by side the same way. :func:`make_console`
gives a console that writes colour on a terminal and plain text when piped or when ``NO_COLOR`` is set.

Every name a tenant controls (cgroup, container, command, thread) is put in as plain text, never as rich markup.
The renderer knows nothing of the rules: it draws what the diagnosis holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agent.diagnosis.comparison import Comparison, Difference
from agent.diagnosis.facts import CpuShares, NodeView, ProcessView, ThreadView, Workload, WorkloadView
from agent.diagnosis.findings import Diagnosis, Evidence, Finding, Observation, Unchecked
from agent.diagnosis.render.budget import budget_lines
from agent.diagnosis.render.code import code_lines
from agent.diagnosis.render.numbers import number, plural, with_unit
from agent.identity.labels import visible

SHOWN = 8  # threads and processes drawn per workload; the rest are counted
UNNAMED = "unnamed workload (the artifacts name no container or cgroup)"
CPU_STATES = (  # CpuShares field, top's abbreviation
    ("user", "us"),
    ("system", "sy"),
    ("nice", "ni"),
    ("idle", "id"),
    ("iowait", "wa"),
    ("irq", "hi"),
    ("softirq", "si"),
    ("steal", "st"),
)


def printable(text: str) -> str:
    """*text* with control characters (a terminal's escapes among them) and every other invisible character shown
    as an escape (``\\x1b``, ``\\u200b``), as label values show them."""
    return visible(text)


def _text(text: str = "", style: str = "") -> Text:
    """Plain text, never markup, with control characters made visible."""
    return Text(printable(text), style=style)


def make_console(file: IO[str] | None = None, width: int | None = None) -> Console:
    """A console for *file* (stdout): colour on a terminal, plain text when piped or when NO_COLOR is set."""
    plain = bool(os.environ.get("NO_COLOR"))
    return Console(
        file=file,
        width=width,
        color_system=None if plain else "auto",
        highlight=False,
        emoji=False,
        markup=False,
    )


def workload_name(ref: Workload | None) -> str:
    """The workload as a person names it; artifacts that do not name it say so."""
    if ref is None or ref == Workload():
        return UNNAMED
    return ref.name


def cpu_states(shares: CpuShares) -> list[tuple[str, str, float]]:
    """The known states of *shares*, each as (name, top's abbreviation, percent), in top's order."""
    return [(name, short, value) for name, short in CPU_STATES if (value := getattr(shares, name)) is not None]


def rank_threads(threads: Iterable[ThreadView]) -> list[ThreadView]:
    """*threads*, most time in system calls first (sched_yield time when that is all there is), then most CPU."""
    return sorted(
        threads,
        key=lambda thread: (thread.syscall_seconds or thread.sched_yield_seconds or 0.0, thread.cpu_percent or 0.0),
        reverse=True,
    )


def rank_processes(processes: Iterable[ProcessView]) -> list[ProcessView]:
    """*processes*, most CPU first."""
    return sorted(processes, key=lambda process: process.cpu_percent or 0.0, reverse=True)


def difference_cells(difference: Difference) -> tuple[str, str, str]:
    """A's value, B's value ("?" when unknown) and the ratio A / B ("" when there is none), as printed."""
    return (
        "?" if difference.a is None else with_unit(difference.a, difference.unit),
        "?" if difference.b is None else with_unit(difference.b, difference.unit),
        "" if difference.ratio is None else f"{difference.ratio:,.1f}x",
    )


def _node(node: NodeView, tree: Tree) -> None:
    branch = tree.add(_text("node", style="bold"))
    parts = [f"CPUs {node.cpus}" if node.cpus is not None else "CPUs unknown"]
    if node.load_average is not None:
        parts.append("load average " + " ".join(f"{value:.2f}" for value in node.load_average))
    if node.run_queue is not None:
        parts.append(f"runnable tasks {number(node.run_queue)}")
    if node.context_switches_per_second is not None:
        parts.append(f"context switches {number(node.context_switches_per_second)}/s")
    branch.add(_text(" · ".join(parts)))
    if node.cpu is not None:
        shown = "  ".join(f"{value:.1f} {short}" for _name, short, value in cpu_states(node.cpu))
        branch.add(_text(f"CPU time{' since boot' if node.cpu.since_boot else ''}: {shown}"))
    else:
        branch.add(_text("CPU time: unknown", style="dim"))


def _workload_summary(workload: WorkloadView) -> str:
    parts: list[str] = []
    if workload.seconds is not None:
        parts.append(f"over {number(workload.seconds)} s")
    if workload.threads is not None:
        parts.append(plural(workload.threads, "thread"))
    if workload.cpu_used_cores is not None:
        parts.append(f"CPU used {number(workload.cpu_used_cores)}")
    if workload.cpus_allowed is not None:
        parts.append(f"may use {number(workload.cpus_allowed)} CPUs")
    if workload.system_share is not None:
        parts.append(f"system {100 * workload.system_share:.1f} %")
    if workload.sched_yield_calls is not None:
        parts.append(f"sched_yield {number(workload.sched_yield_calls)}")
    if workload.futex_total is not None:
        parts.append(f"futex {number(workload.futex_total)}")
    if workload.futex_wait_seconds is not None:
        parts.append(f"futex time {number(workload.futex_wait_seconds)} s")
    if workload.runqueue_wait_seconds is not None:
        parts.append(f"waited for a CPU {number(workload.runqueue_wait_seconds)} s")
    if workload.throttled_periods is not None and workload.periods:
        parts.append(f"throttled {number(workload.throttled_periods)} of {number(workload.periods)} periods")
    return " · ".join(parts) or "no counts"


def _thread_line(thread: ThreadView) -> Text:
    parts: list[str] = []
    if thread.sched_yield_calls is not None:
        seconds = f" ({number(thread.sched_yield_seconds)} s)" if thread.sched_yield_seconds is not None else ""
        parts.append(f"sched_yield {number(thread.sched_yield_calls)}{seconds}")
    if thread.futex_calls is not None:
        extra = []
        if thread.futex_seconds is not None:
            extra.append(f"{number(thread.futex_seconds)} s")
        if thread.futex_max_seconds is not None:
            extra.append(f"longest {number(thread.futex_max_seconds)} s")
        parts.append(f"futex {number(thread.futex_calls)}" + (f" ({', '.join(extra)})" if extra else ""))
    if thread.cpu_percent is not None:
        parts.append(f"{thread.cpu_percent:.1f} %CPU")
    if thread.system_percent is not None:
        parts.append(f"{thread.system_percent:.1f} %sys")
    label = _text(f"{thread.tid if thread.tid is not None else '?'} ")
    label.append(printable(thread.comm or "?"), style="cyan")
    label.append(printable(": " + (" · ".join(parts) or "no counts")))
    return label


def _threads(threads: tuple[ThreadView, ...], tree: Tree) -> None:
    ranked = rank_threads(threads)
    more = len(ranked) - SHOWN
    title = f"threads ({len(ranked):,}; by time in system calls, then CPU" + (
        f"; {more:,} more not drawn)" if more > 0 else ")"
    )
    branch = tree.add(_text(title, style="bold"))
    for thread in ranked[:SHOWN]:
        branch.add(_thread_line(thread))


def _process_line(process: ProcessView) -> Text:
    label = _text(f"{process.pid} ")
    label.append(printable(process.command or process.comm or "?"), style="cyan")
    parts: list[str] = []
    if process.threads is not None:
        parts.append(plural(process.threads, "thread"))
    if process.cpu_percent is not None:
        parts.append(f"{process.cpu_percent:.1f} %CPU")
    if process.system_percent is not None:
        parts.append(f"{process.system_percent:.1f} %sys")
    if process.affinity:
        parts.append(f"{len(process.affinity)} CPUs in its affinity")
    if process.libraries:
        parts.append("maps " + ", ".join(process.libraries))
    if process.environment is not None:
        parts.append(
            "sets " + ", ".join(f"{name}={value}" for name, value in process.environment)
            if process.environment
            else "sets no thread variable"
        )
    label.append(printable(": " + (" · ".join(parts) or "no facts")))
    return label


def _processes(processes: tuple[ProcessView, ...], tree: Tree) -> None:
    ranked = rank_processes(processes)
    more = len(ranked) - SHOWN
    branch = tree.add(
        _text(
            f"processes ({len(ranked):,}; by CPU" + (f"; {more:,} more not drawn)" if more > 0 else ")"), style="bold"
        )
    )
    for process in ranked[:SHOWN]:
        branch.add(_process_line(process))


def _evidence(items: Iterable[Evidence], tree: Tree) -> None:
    for item in items:
        line = _text(f"{item.fact}: ")
        line.append(with_unit(item.value, item.unit), style="bold")
        if item.compared_with:
            line.append(printable(f"  ({item.compared_with})"), style="dim")
        tree.add(line)


def _finding(finding: Finding, tree: Tree) -> None:
    title = _text("finding: ", style="bold red")
    title.append(printable(f"{finding.cause.value} / {finding.mechanism.value}"), style="bold red")
    title.append(f"  confidence {finding.confidence.value}")
    branch = tree.add(title)
    branch.add(_text(finding.explanation))
    if finding.processes:
        branch.add(_text("processes: " + ", ".join(str(pid) for pid in finding.processes)))
    if finding.libraries:
        branch.add(_text("libraries: " + ", ".join(finding.libraries)))
    _evidence(finding.evidence, branch.add(_text("evidence", style="bold")))
    fix = branch.add(_text("fix: " + finding.fix.summary, style="bold green"))
    for number_, step in enumerate(finding.fix.steps, 1):
        fix.add(_text(f"{number_}. {step}"))
    if finding.collect_next:
        collect = branch.add(_text("to be surer, collect", style="bold"))
        for item in finding.collect_next:
            collect.add(_text(item))


def _unchecked(unchecked: Unchecked, tree: Tree) -> None:
    branch = tree.add(_text(f"could not check {unchecked.rule.value}", style="yellow"))
    branch.add(_text("missing: " + "; ".join(unchecked.missing)))
    collect = branch.add(_text("collect next", style="bold"))
    for item in unchecked.collect_next:
        collect.add(_text(item))


def _observation(observation: Observation, tree: Tree) -> None:
    branch = tree.add(
        _text(f"{observation.topic}: ", style="bold yellow").append(printable(observation.summary), style="")
    )
    _evidence(observation.evidence, branch)
    if observation.look_next:
        look = branch.add(_text("look next", style="bold"))
        for item in observation.look_next:
            look.add(_text(item))


def rank_workloads(diagnosis: Diagnosis) -> list[WorkloadView]:
    """The workloads, those with a finding first, then by sched_yield calls, futex wait and CPU used."""
    flagged = {finding.workload for finding in diagnosis.findings}
    return sorted(
        diagnosis.facts.workloads,
        key=lambda w: (
            w.ref in flagged,
            w.sched_yield_calls or 0.0,
            w.futex_wait_seconds or 0.0,
            w.cpu_used_cores or 0.0,
        ),
        reverse=True,
    )


def named_workloads(diagnosis: Diagnosis) -> set[Workload | None]:
    """The workloads a finding, an undecided rule or an observation names: those whose time budget is drawn."""
    return (
        {finding.workload for finding in diagnosis.findings}
        | {unchecked.workload for unchecked in diagnosis.unchecked}
        | {observation.workload for observation in diagnosis.observations}
    )


def _budget(workload: WorkloadView, tree: Tree) -> None:
    lines = budget_lines(workload)
    if not lines:
        return
    over = f" over {number(workload.seconds)} s" if workload.seconds is not None else ""
    branch = tree.add(_text(f"time budget{over} (thread-seconds)", style="bold"))
    for line in lines:
        branch.add(_text(line))


def _workload(workload: WorkloadView, diagnosis: Diagnosis, tree: Tree) -> None:
    findings = [finding for finding in diagnosis.findings if finding.workload == workload.ref]
    title = _text(workload_name(workload.ref), style="bold")
    verdict = plural(len(findings), "finding") if findings else "no finding"
    title.append(f"  {verdict}", style="red" if findings else "green")
    branch = tree.add(title)
    branch.add(_text(_workload_summary(workload)))
    if workload.ref in named_workloads(diagnosis):
        _budget(workload, branch)
    code = code_lines(workload)
    if code:
        code_branch = branch.add(_text("code", style="bold"))
        for code_line in code:
            code_branch.add(_text(code_line))
    for pool in workload.pools or ():
        line = _text(f"pool: {pool.size} workers of ")
        line.append(printable(pool.command), style="cyan")
        line.append(f" under {pool.parent_pid}")
        branch.add(line)
    for library in workload.libraries or ():
        version = f" {library.version}" if library.version else ""
        branch.add(
            _text(f"library: {library.implementation}{version} ({library.api}) in {len(library.pids)} process(es)")
        )
    if workload.processes:
        _processes(workload.processes, branch)
    if workload.thread_views:
        _threads(workload.thread_views, branch)
    for finding in findings:
        _finding(finding, branch)
    for unchecked in diagnosis.unchecked:
        if unchecked.workload == workload.ref:
            _unchecked(unchecked, branch)


def summary(diagnosis: Diagnosis) -> tuple[str, str]:
    """The one-line verdict and its tone ("bad", "unsure", "good")."""
    if diagnosis.findings:
        return plural(len(diagnosis.findings), "finding"), "bad"
    if diagnosis.unchecked:
        rules = plural(len(diagnosis.unchecked), "rule")
        return f"no finding, but {rules} could not decide: collect what they ask for", "unsure"
    return "no finding: no thread-contention cause in these facts", "good"


def diagnosis_tree(diagnosis: Diagnosis, title: str) -> Tree:
    """The tree of one diagnosis (what :func:`render_text` prints)."""
    heading = _text(title, style="bold")
    verdict, tone = summary(diagnosis)
    heading.append(f"  {verdict}", style={"bad": "bold red", "unsure": "bold yellow", "good": "bold green"}[tone])
    tree = Tree(heading)
    if diagnosis.facts.sources:
        tree.add(_text("from: " + "; ".join(diagnosis.facts.sources), style="dim"))
    _node(diagnosis.facts.node, tree)
    known = {workload.ref for workload in diagnosis.facts.workloads}
    for workload in rank_workloads(diagnosis):
        _workload(workload, diagnosis, tree)
    stray = [finding for finding in diagnosis.findings if finding.workload not in known]
    for finding in stray:
        _finding(finding, tree.add(_text(workload_name(finding.workload), style="bold")))
    for unchecked in diagnosis.unchecked:
        if unchecked.workload not in known:
            _unchecked(unchecked, tree)
    if diagnosis.observations:
        branch = tree.add(_text("observations (not a thread-contention cause)", style="bold"))
        for observation in diagnosis.observations:
            _observation(observation, branch)
    if diagnosis.facts.notes:
        branch = tree.add(_text("what these sources cannot tell", style="bold dim"))
        for note in diagnosis.facts.notes:
            branch.add(_text(note, style="dim"))
    return tree


def render_text(diagnosis: Diagnosis, console: Console, title: str = "schedwatch diagnosis") -> None:
    """Print *diagnosis* on *console* as a top-down tree (see :func:`make_console` for the console)."""
    console.print(diagnosis_tree(diagnosis, title))


def _difference_table(comparison: Comparison) -> Table:
    table = Table(title=_text("what differs"), title_justify="left", show_edge=False, pad_edge=False)
    table.add_column(_text("fact"))
    table.add_column(_text(comparison.a_name), justify="right", overflow="fold")
    table.add_column(_text(comparison.b_name), justify="right", overflow="fold")
    table.add_column(_text("A / B"), justify="right")
    for difference in comparison.differences:
        table.add_row(_text(difference.fact), *(_text(cell) for cell in difference_cells(difference)))
    return table


def render_comparison_text(comparison: Comparison, console: Console) -> None:
    """Print *comparison*: why A and B differ, the cause and the fix, the table of differences, then each side."""
    heading = _text("schedwatch compare: ", style="bold")
    heading.append(printable(comparison.a_name), style="bold cyan")
    heading.append(printable(" vs "), style="bold")
    heading.append(printable(comparison.b_name), style="bold cyan")
    tree = Tree(heading)
    why = tree.add(_text("why they differ", style="bold"))
    for sentence in comparison.explanation:
        why.add(_text(sentence))
    if comparison.cause is not None:
        side = _text("cause in ")
        side.append(printable(comparison.cause_side or "?"), style="cyan")
        _finding(comparison.cause, tree.add(side))
    console.print(tree)
    console.print(_difference_table(comparison))
    console.print(diagnosis_tree(comparison.a, f"A: {comparison.a_name}"))
    console.print(diagnosis_tree(comparison.b, f"B: {comparison.b_name}"))
