"""A diagnosis (or a comparison of two) drawn as a top-down tree on a terminal with rich.

The answer first, each finding once: ``render_text(diagnosis, console)`` draws which schedwatch made the report and
from which inputs, then each finding (the cause, its fix with the values to paste, its evidence), then the details:
the node, the workloads ranked (most contended first) with their processes and threads (those with nothing counted
folded into one line), pools and libraries, the rules that could not decide, the observations, and what the sources
could not tell. ``render_comparison_text(comparison, console)`` leads with which side is slow, the cause and the fix,
the inputs and why the two differ, then the table of differences and each side's details. :func:`make_console` gives
a console that writes colour on a terminal and plain text when piped or when ``NO_COLOR`` is set.

Every name a tenant controls (cgroup, container, command, thread) is put in as plain text, never as rich markup.
The renderer knows nothing of the rules: it draws what the diagnosis holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agent.diagnosis.comparison import Comparison
from agent.diagnosis.facts import NodeView, ProcessView, ThreadView, WorkloadView
from agent.diagnosis.findings import Diagnosis, Evidence, Finding, Observation, Unchecked
from agent.diagnosis.render.answer import cause_title, inputs_of, ready_lines, shared_notes, slow_line
from agent.diagnosis.render.budget import budget_lines
from agent.diagnosis.render.code import code_lines
from agent.diagnosis.render.numbers import number, plural, with_unit
from agent.diagnosis.render.provenance import Made
from agent.diagnosis.render.shared import (
    cpu_states,
    difference_cells,
    idle,
    named_workloads,
    rank_findings,
    rank_processes,
    rank_threads,
    rank_workloads,
    summary,
    where,
    workload_name,
)
from agent.identity.labels import visible

SHOWN = 8  # threads and processes drawn per workload; the rest are counted
READY = ("Docker", "shell")  # the fix's lines to paste the terminal shows (the page shows each kind)
TONES = {"bad": "bold red", "unsure": "bold yellow", "good": "bold green"}


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


def _node(node: NodeView, tree: Tree) -> None:
    parts = [f"CPUs {node.cpus}" if node.cpus is not None else "CPUs unknown"]
    if node.load_average is not None:
        parts.append("load average " + " ".join(f"{value:.2f}" for value in node.load_average))
    if node.run_queue is not None:
        parts.append(f"runnable tasks {number(node.run_queue)}")
    if node.context_switches_per_second is not None:
        parts.append(f"context switches {number(node.context_switches_per_second)}/s")
    if node.cpu is not None:
        shown = " ".join(f"{value:.1f} {short}" for _name, short, value in cpu_states(node.cpu) if value)
        parts.append(f"CPU time{' since boot' if node.cpu.since_boot else ''}: {shown or 'all 0'}")
    line = _text("node: ", style="bold")
    line.append(printable(" · ".join(parts)))
    tree.add(line)


def _workload_summary(workload: WorkloadView) -> str:
    w = workload
    parts = (
        _said("over {} s", w.seconds),
        None if w.threads is None else plural(w.threads, "thread"),
        _said("CPU used {}", w.cpu_used_cores),
        _said("may use {} CPUs", w.cpus_allowed),
        None if w.system_share is None else f"system {100 * w.system_share:.1f} %",
        _said("sched_yield {}", w.sched_yield_calls),
        _said("futex {}", w.futex_total),
        _said("futex time {} s", w.futex_wait_seconds),
        _said("waited for a CPU {} s", w.runqueue_wait_seconds),
        None if w.throttled_periods is None or not w.periods else _throttled(w.throttled_periods, w.periods),
    )
    return " · ".join(part for part in parts if part is not None) or "no counts"


def _said(template: str, value: float | None) -> str | None:
    """*template* with the number *value* in its {} (None when the value is unknown)."""
    return None if value is None else template.format(number(value))


def _throttled(throttled: float, periods: float) -> str:
    return f"throttled {number(throttled)} of {number(periods)} periods"


def _thread_line(thread: ThreadView) -> Text:
    parts: list[str] = []
    if thread.sched_yield_calls:
        seconds = f" ({number(thread.sched_yield_seconds)} s)" if thread.sched_yield_seconds else ""
        parts.append(f"sched_yield {number(thread.sched_yield_calls)}{seconds}")
    if thread.futex_calls:
        extra = []
        if thread.futex_seconds:
            extra.append(f"{number(thread.futex_seconds)} s")
        if thread.futex_max_seconds:
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
    busy = [thread for thread in ranked if not idle(thread)]
    quiet = len(ranked) - len(busy)
    more = len(busy) - SHOWN
    folded = [f"{more:,} more not drawn"] if more > 0 else []
    if quiet:
        folded.append(f"{quiet:,} with nothing counted")
    title = f"threads ({len(ranked):,}; by time in system calls, then CPU" + "".join(f"; {f}" for f in folded) + ")"
    branch = tree.add(_text(title, style="bold"))
    for thread in busy[:SHOWN]:
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


def _finding(finding: Finding, tree: Tree, place: str) -> None:
    """The finding, whole, once: the cause and where, why, the fix with the values to paste, then the evidence."""
    title = _text("finding: ", style="bold red")
    title.append(printable(cause_title(finding)), style="bold red")
    if place:
        title.append(printable(f" in {place}"))
    title.append(f"  confidence {finding.confidence.value}")
    branch = tree.add(title)
    branch.add(_text(finding.explanation))
    if finding.processes:
        branch.add(_text("processes: " + ", ".join(str(pid) for pid in finding.processes)))
    if finding.libraries:
        branch.add(_text("libraries: " + ", ".join(finding.libraries)))
    fix = branch.add(_text("fix: " + finding.fix.summary, style="bold green"))
    for kind, line in ready_lines(finding.fix):
        if kind in READY:
            fix.add(_text(f"{kind}: {line}", style="green"))
    for number_, step in enumerate(finding.fix.steps, 1):
        fix.add(_text(f"{number_}. {step}"))
    _evidence(finding.evidence, branch.add(_text("evidence", style="bold")))
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
    if findings:
        causes = ", ".join(finding.cause.value for finding in findings)
        title.append(printable(f"  {plural(len(findings), 'finding')} ({causes}: above)"), style="red")
    else:
        title.append("  no finding", style="green")
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
    for unchecked in diagnosis.unchecked:
        if unchecked.workload == workload.ref:
            _unchecked(unchecked, branch)


def _details(diagnosis: Diagnosis, tree: Tree) -> None:
    """The node, each workload, the rules that could not decide elsewhere, and the observations."""
    _node(diagnosis.facts.node, tree)
    known = {workload.ref for workload in diagnosis.facts.workloads}
    for workload in rank_workloads(diagnosis):
        _workload(workload, diagnosis, tree)
    for unchecked in diagnosis.unchecked:
        if unchecked.workload not in known:
            _unchecked(unchecked, tree)
    if diagnosis.observations:
        branch = tree.add(_text("observations (not a thread-contention cause)", style="bold"))
        for observation in diagnosis.observations:
            _observation(observation, branch)


def _notes(notes: Sequence[str], tree: Tree) -> None:
    if notes:
        branch = tree.add(_text("what these sources cannot tell", style="bold dim"))
        for note in notes:
            branch.add(_text(note, style="dim"))


def _made(made: Made | None, tree: Tree) -> None:
    if made is not None:
        tree.add(_text(made.line, style="dim"))


def diagnosis_tree(diagnosis: Diagnosis, title: str, made: Made | None = None) -> Tree:
    """The tree of one diagnosis (what :func:`render_text` prints): provenance, the findings, then the details."""
    heading = _text(title, style="bold")
    verdict, tone = summary(diagnosis)
    heading.append(f"  {verdict}", style=TONES[tone])
    tree = Tree(heading)
    _made(made, tree)
    tree.add(_text("inputs: " + inputs_of(diagnosis), style="dim"))
    for finding in rank_findings(diagnosis):
        _finding(finding, tree, where(finding.workload))
    _details(diagnosis, tree)
    _notes(diagnosis.facts.notes, tree)
    return tree


def render_text(
    diagnosis: Diagnosis, console: Console, title: str = "schedwatch diagnosis", made: Made | None = None
) -> None:
    """Print *diagnosis* on *console* as a top-down tree (see :func:`make_console` for the console)."""
    console.print(diagnosis_tree(diagnosis, title, made))


def _difference_table(comparison: Comparison) -> Table:
    table = Table(title=_text("what differs"), title_justify="left", show_edge=False, pad_edge=False)
    table.add_column(_text("fact"))
    table.add_column(_text(comparison.a_name), justify="right", overflow="fold")
    table.add_column(_text(comparison.b_name), justify="right", overflow="fold")
    table.add_column(_text("A / B"), justify="right")
    for difference in comparison.differences:
        if difference.a or difference.b:  # a fact that is 0 (or unknown) on both sides tells them not apart
            table.add_row(_text(difference.fact), *(_text(cell) for cell in difference_cells(difference)))
    return table


def _side(diagnosis: Diagnosis, name: str) -> Tree:
    heading = _text(name, style="bold cyan")
    verdict, tone = summary(diagnosis)
    heading.append(f"  {verdict}", style=TONES[tone])
    tree = Tree(heading)
    _details(diagnosis, tree)
    return tree


def render_comparison_text(comparison: Comparison, console: Console, made: Made | None = None) -> None:
    """Print *comparison*: which side is slow, the cause and its fix, the inputs, why they differ; then the table
    of differences, each side's details, and what the sources cannot tell."""
    heading = _text("schedwatch compare: ", style="bold")
    heading.append(printable(comparison.a_name), style="bold cyan")
    heading.append(printable(" vs "), style="bold")
    heading.append(printable(comparison.b_name), style="bold cyan")
    tree = Tree(heading)
    _made(made, tree)
    tree.add(_text(slow_line(comparison), style="bold"))
    if comparison.cause is not None:
        _finding(comparison.cause, tree, comparison.cause_side or "?")
    inputs = tree.add(_text("inputs", style="bold"))
    for name, diagnosis in ((comparison.a_name, comparison.a), (comparison.b_name, comparison.b)):
        inputs.add(_text(f"{name}: {inputs_of(diagnosis)}", style="dim"))
    why = tree.add(_text("why they differ", style="bold"))
    for sentence in comparison.explanation:
        why.add(_text(sentence))
    others = [f for side in (comparison.a, comparison.b) for f in rank_findings(side) if f is not comparison.cause]
    for finding in others:
        side = comparison.a_name if finding in comparison.a.findings else comparison.b_name
        _finding(finding, tree, ", ".join(part for part in (side, where(finding.workload)) if part))
    console.print(tree)
    console.print(_difference_table(comparison))
    console.print(_side(comparison.a, comparison.a_name))
    console.print(_side(comparison.b, comparison.b_name))
    notes = Tree(_text("what these sources cannot tell", style="bold dim"))
    for note in shared_notes(comparison):
        notes.add(_text(note, style="dim"))
    if comparison.a.facts.notes or comparison.b.facts.notes:
        console.print(notes)
