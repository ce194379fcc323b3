"""A diagnosis (or a comparison of two) as one self-contained HTML page to paste into a ticket.

The page leads with the answer: which schedwatch made it, when and from which inputs; which side is slow (a
comparison); each finding once, with its fix and the values to paste. The details follow as sections folded
(``<details>``) under a table of contents: the evidence, what differs, each workload's processes and threads, what
the sources cannot tell. Columns empty in every row are left out, threads with nothing counted are folded, and each
chart has an axis shared by what it compares (A and B of one fact; every thread of both sides).

Nothing is fetched: the style is inline, the charts are inline SVG, and the diagnosis itself is embedded as JSON
(``<script type="application/json" id="schedwatch-data">``, never executed: the document ``--json`` prints) for
whoever wants the numbers. Every text is escaped, so a tenant's cgroup, container, command or thread name cannot
add markup, a script or a link, and its invisible characters are shown as escapes (``\\x1b``, ``\\u202e``) as the
text report shows them. The renderer knows nothing of the rules: it draws what the diagnosis holds.

``diagnosis_page(diagnosis, title, made)`` and ``comparison_page(comparison, made)`` return the page as a string;
a new part of a report is one more :class:`Section`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent.diagnosis.comparison import Comparison
from agent.diagnosis.facts import NodeView, ThreadView, WorkloadView
from agent.diagnosis.findings import Diagnosis, Evidence, Finding, Observation, Unchecked
from agent.diagnosis.render.answer import cause_title, inputs_of, ready_lines, shared_notes, slow_line
from agent.diagnosis.render.budget import budget_lines
from agent.diagnosis.render.charts import difference_chart, drawn, thread_chart, thread_seconds
from agent.diagnosis.render.code import code_lines
from agent.diagnosis.render.json_report import comparison_to_json, to_json
from agent.diagnosis.render.markup import prose
from agent.diagnosis.render.markup import shown as _e
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

TABLE_ROWS = 40  # processes and threads listed per workload

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:20px auto;max-width:1100px;color:#1d232b;
background:#fff;line-height:1.4}
h1{font-size:1.45em;margin:0} h2{font-size:1.15em;margin:0;display:inline} h3{font-size:1em;margin:12px 0 4px}
.dim{color:#66707c} .made{margin:2px 0 10px;font-size:.88em} p{margin:5px 0}
.badge{display:inline-block;border-radius:4px;padding:1px 8px;font-size:.9em;font-weight:600}
.bad{background:#fde3e1;color:#a3170c} .good{background:#dff3e4;color:#17692f} .warn{background:#fff1cf;color:#7a5200}
.answer{border:1px solid #d6dbe1;border-left:5px solid #c62f22;border-radius:6px;padding:8px 16px;margin:8px 0}
.answer.good{border-left-color:#2f9e50;background:none;color:inherit} .lead{font-size:1.1em}
.card{border-top:1px solid #eceff2;padding:6px 0;margin:4px 0} .card:first-child{border-top:none}
.card.obs h3,.card.unchecked h3{margin-top:4px}
table{border-collapse:collapse;margin:4px 0 8px;font-size:.92em} th,td{padding:2px 10px;text-align:left;
border-bottom:1px solid #eceff2} td.n{text-align:right;font-variant-numeric:tabular-nums}
.fix{background:#eef8f0;border-radius:6px;padding:6px 14px;margin:6px 0} .fix ol{margin:4px 0}
pre{background:#f6f8fa;border-radius:4px;padding:6px 10px;margin:4px 0;white-space:pre-wrap;font-size:.9em}
code,.mono,pre{font-family:ui-monospace,Menlo,monospace}
nav{font-size:.92em;margin:10px 0} details{border-top:1px solid #d6dbe1;padding:6px 0}
summary{cursor:pointer;padding:2px 0} details>summary>h2{font-size:1.1em}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#1d232b} svg .axis{fill:#66707c}
ul,ol{margin:4px 0 6px}
"""

BADGES = {"bad": "bad", "unsure": "warn", "good": "good"}
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"  # the page may fetch nothing


@dataclass(frozen=True)
class Section:
    """A folded part of the page below the answer, listed in its table of contents."""

    key: str  # its anchor
    title: str
    body: str  # HTML
    open: bool = False


def _data(document: Any) -> str:
    """JSON that cannot close its script element or open a comment."""
    text = json.dumps(document, ensure_ascii=False, sort_keys=True)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _page(title: str, body: Sequence[str], data: Any) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
            *body,
            f'<script type="application/json" id="schedwatch-data">{_data(data)}</script>',
            "</body></html>",
        ]
    )


def _folded(sections: Iterable[Section]) -> list[str]:
    """The table of contents, then each section folded (open where it says so)."""
    shown = [section for section in sections if section.body]
    if not shown:
        return []
    links = " · ".join(f'<a href="#{section.key}">{_e(section.title)}</a>' for section in shown)
    parts = [f"<nav><b>Contents:</b> {links}</nav>"]
    for section in shown:
        opened = " open" if section.open else ""
        parts.append(
            f'<details id="{section.key}"{opened}><summary><h2>{_e(section.title)}</h2></summary>{section.body}'
            "</details>"
        )
    return parts


def _made(made: Made | None) -> str:
    return f'<p class="dim made">{_e(made.line)}</p>' if made is not None else ""


def _evidence(items: Iterable[Evidence]) -> str:
    rows = "".join(
        f"<tr><td>{_e(item.fact)}</td><td class=n><b>{_e(with_unit(item.value, item.unit))}</b></td>"
        f"<td class=dim>{_e(item.compared_with)}</td></tr>"
        for item in items
    )
    return f"<table><tr><th>evidence</th><th>value</th><th>compared with</th></tr>{rows}</table>" if rows else ""


def _list(items: Iterable[str], ordered: bool = False) -> str:
    tag = "ol" if ordered else "ul"
    inner = "".join(f"<li>{prose(item)}</li>" for item in items)
    return f"<{tag}>{inner}</{tag}>" if inner else ""


def _fix(finding: Finding) -> str:
    fix = finding.fix
    ready = "\n".join(f"{_e(kind)}: {_e(line)}" for kind, line in ready_lines(fix))
    return (
        f'<div class="fix"><b>Fix:</b> {prose(fix.summary)}'
        + (f"<pre>{ready}</pre>" if ready else "")
        + _list(fix.steps, ordered=True)
        + "</div>"
    )


def _finding(finding: Finding, place: str, evidence_open: bool) -> str:
    """The finding, whole, once: the cause and where, why, the fix with the values to paste, then its evidence."""
    parts = [
        '<div class="card finding">',
        f'<p class="lead"><span class="badge bad">{_e(cause_title(finding))}</span>'
        + (f" in <b>{_e(place)}</b> " if place else " ")
        + f'<span class="dim">confidence {_e(finding.confidence.value)}</span></p>',
        f"<p>{prose(finding.explanation)}</p>",
    ]
    if finding.processes:
        parts.append(
            f"<p>processes: <span class=mono>{_e(', '.join(str(pid) for pid in finding.processes))}</span></p>"
        )
    if finding.libraries:
        parts.append(f"<p>libraries: {_e(', '.join(finding.libraries))}</p>")
    parts.append(_fix(finding))
    evidence = _evidence(finding.evidence)
    if finding.collect_next:
        evidence += f"<p><b>To be surer, collect:</b></p>{_list(finding.collect_next)}"
    if evidence:
        opened = " open" if evidence_open else ""
        count = plural(len(finding.evidence), "fact")
        parts.append(f"<details{opened}><summary>evidence ({count})</summary>{evidence}</details>")
    parts.append("</div>")
    return "".join(parts)


def _unchecked(unchecked: Unchecked) -> str:
    return (
        f'<div class="card unchecked"><h3><span class="badge warn">could not check {_e(unchecked.rule.value)}</span> '
        f'<span class="dim">{_e(workload_name(unchecked.workload))}</span></h3>'
        f"<p>missing: {_e('; '.join(unchecked.missing))}</p>"
        f"<p><b>Collect next:</b></p>{_list(unchecked.collect_next)}</div>"
    )


def _observation(observation: Observation) -> str:
    return (
        f'<div class="card obs"><h3><span class="badge warn">{_e(observation.topic)}</span></h3>'
        f"<p>{_e(observation.summary)}</p>{_evidence(observation.evidence)}"
        f"<p><b>Look next:</b></p>{_list(observation.look_next)}</div>"
    )


def _pairs(pairs: Iterable[tuple[str, str]]) -> str:
    """Known facts as one line of "name value" pairs; unknown ones ("") left out."""
    shown = [f"{_e(name)} <b>{_e(value)}</b>" for name, value in pairs if value]
    return f"<p>{' · '.join(shown)}</p>" if shown else ""


def _node(node: NodeView) -> str:
    pairs = [
        ("CPUs", "unknown" if node.cpus is None else str(node.cpus)),
        ("load average", "" if node.load_average is None else " ".join(f"{v:.2f}" for v in node.load_average)),
        ("runnable tasks", "" if node.run_queue is None else number(node.run_queue)),
        (
            "context switches",
            "" if node.context_switches_per_second is None else f"{number(node.context_switches_per_second)}/s",
        ),
    ]
    if node.cpu is not None:
        since = " since boot" if node.cpu.since_boot else ""
        states = " ".join(f"{value:.1f} {short}" for _name, short, value in cpu_states(node.cpu) if value)
        pairs.append((f"CPU time{since}", states or "all 0"))
    return "<h3>Node</h3>" + _pairs(pairs)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table without the columns that are empty in every row."""
    rows = [list(row) for row in rows]
    kept = [index for index in range(len(headers)) if any(row[index] for row in rows)]
    head = "".join(f"<th>{_e(headers[index])}</th>" for index in kept)
    body = "".join("<tr>" + "".join(f"<td>{_e(row[index])}</td>" for index in kept) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _known(value: float | None, suffix: str = "") -> str:
    return "" if value is None else f"{number(value)}{suffix}"


THREAD_HEADERS = ("tid", "command", "sched_yield", "in sched_yield", "futex", "in futex", "longest futex", "%CPU")


def _thread_row(t: ThreadView) -> tuple[str, ...]:
    return (
        "" if t.tid is None else str(t.tid),
        t.comm or "?",
        _known(None if t.sched_yield_calls is None else float(t.sched_yield_calls)),
        _known(t.sched_yield_seconds, " s"),
        _known(None if t.futex_calls is None else float(t.futex_calls)),
        _known(t.futex_seconds, " s"),
        _known(t.futex_max_seconds, " s"),
        "" if t.cpu_percent is None else f"{t.cpu_percent:.1f}",
    )


def _thread_table(threads: Sequence[ThreadView]) -> str:
    ranked = rank_threads(threads)
    busy = [thread for thread in ranked if not idle(thread)]
    quiet = [thread for thread in ranked if idle(thread)]
    more = len(busy) - TABLE_ROWS
    parts = []
    if busy:
        rows = _table(THREAD_HEADERS, (_thread_row(t) for t in busy[:TABLE_ROWS]))
        parts.append(f"<details><summary>threads: the numbers ({len(busy):,})</summary>{rows}</details>")
    if more > 0:
        parts.append(f'<p class="dim">{more:,} more threads not listed</p>')
    if quiet:
        names = ", ".join(f"{t.comm or '?'} {t.tid if t.tid is not None else '?'}" for t in quiet[:TABLE_ROWS])
        more_quiet = f" and {len(quiet) - TABLE_ROWS:,} more" if len(quiet) > TABLE_ROWS else ""
        parts.append(
            f"<details><summary>{len(quiet):,} threads with nothing counted</summary>"
            f'<p class="dim">{_e(names)}{more_quiet}</p></details>'
        )
    return "".join(parts)


def _processes(workload: WorkloadView) -> str:
    ranked = rank_processes(workload.processes or ())
    rows = (
        (
            str(p.pid),
            p.command or p.comm or "?",
            "" if p.threads is None else str(p.threads),
            "" if p.cpu_percent is None else f"{p.cpu_percent:.1f}",
            "" if p.system_percent is None else f"{p.system_percent:.1f}",
            ", ".join(p.libraries),
        )
        for p in ranked[:TABLE_ROWS]
    )
    more = len(ranked) - TABLE_ROWS
    note = f'<p class="dim">{more:,} more processes not listed</p>' if more > 0 else ""
    return "<h3>Processes</h3>" + _table(("pid", "command", "threads", "%CPU", "%sys", "libraries"), rows) + note


def _workload(workload: WorkloadView, diagnosis: Diagnosis, axis_end: float | None) -> str:
    findings = [finding for finding in diagnosis.findings if finding.workload == workload.ref]
    causes = ", ".join(finding.cause.value for finding in findings)
    badge = (
        f'<span class="badge bad">{_e(causes)}: above</span>'
        if findings
        else '<span class="badge good">no finding</span>'
    )
    facts = [
        ("window", _known(workload.seconds, " s")),
        ("threads", _known(None if workload.threads is None else float(workload.threads))),
        ("CPU used", _known(workload.cpu_used_cores, " CPUs")),
        ("CPUs it may use", _known(workload.cpus_allowed)),
        ("system share", "" if workload.system_share is None else f"{100 * workload.system_share:.1f} %"),
        ("sched_yield calls", _known(workload.sched_yield_calls)),
        ("futex calls", _known(workload.futex_total)),
        ("time in futex calls", _known(workload.futex_wait_seconds, " s")),
        ("waited for a CPU", _known(workload.runqueue_wait_seconds, " s")),
    ]
    parts = [f"<h3>{_e(workload_name(workload.ref))} {badge}</h3>", _pairs(facts)]
    budget = budget_lines(workload) if workload.ref in named_workloads(diagnosis) else ()
    if budget:
        parts.append(f"<h3>Time budget (thread-seconds)</h3>{_list(budget)}")
    code = code_lines(workload)
    if code:
        parts.append(f"<h3>Code</h3>{_list(code)}")
    for pool in workload.pools or ():
        parts.append(f"<p>pool: {pool.size} workers of <b>{_e(pool.command)}</b> under {pool.parent_pid}</p>")
    for library in workload.libraries or ():
        version = f" {library.version}" if library.version else ""
        parts.append(
            f"<p>library: {_e(library.implementation + version)} ({_e(library.api)}) "
            f"in {len(library.pids)} process(es)</p>"
        )
    if workload.thread_views:
        parts.append(thread_chart(workload.thread_views, "Time in system calls per thread", axis_end))
        parts.append(_thread_table(workload.thread_views))
    if workload.processes:
        parts.append(_processes(workload))
    parts.extend(_unchecked(u) for u in diagnosis.unchecked if u.workload == workload.ref)
    return "".join(parts)


def _details(diagnosis: Diagnosis, axis_end: float | None = None) -> str:
    """The node, each workload (most contended first), the rules that could not decide elsewhere."""
    known = {workload.ref for workload in diagnosis.facts.workloads}
    parts = [_node(diagnosis.facts.node)]
    parts.extend(_workload(workload, diagnosis, axis_end) for workload in rank_workloads(diagnosis))
    parts.extend(_unchecked(u) for u in diagnosis.unchecked if u.workload not in known)
    return "".join(parts)


def _observations(diagnosis: Diagnosis) -> str:
    return "".join(_observation(observation) for observation in diagnosis.observations)


def _all_threads(diagnosis: Diagnosis) -> list[ThreadView]:
    return [thread for workload in diagnosis.facts.workloads for thread in workload.thread_views or ()]


def diagnosis_body(diagnosis: Diagnosis, title: str, made: Made | None = None) -> list[str]:
    """The page's parts for one diagnosis: the head, the answer (each finding, its fix), then the folded details."""
    verdict, tone = summary(diagnosis)
    body = [f'<h1>{_e(title)} <span class="badge {BADGES[tone]}">{_e(verdict)}</span></h1>', _made(made)]
    cards = [_finding(f, where(f.workload), evidence_open=True) for f in rank_findings(diagnosis)]
    inputs = f'<p class="dim"><b>Inputs:</b> {_e(inputs_of(diagnosis))}</p>'
    body.append(f'<section class="answer{"" if cards else " good"}">{"".join(cards)}{inputs}</section>')
    flagged = {finding.workload for finding in diagnosis.findings}
    sections = [
        Section(
            "details",
            "Node and workloads",
            _details(diagnosis),
            open=bool(flagged) or len(diagnosis.facts.workloads) < 2,
        ),
        Section("observations", "Observations (not a thread-contention cause)", _observations(diagnosis), open=True),
        Section("notes", "What these sources cannot tell", _list(diagnosis.facts.notes)),
    ]
    body.extend(_folded(sections))
    return body


def diagnosis_page(diagnosis: Diagnosis, title: str = "schedwatch diagnosis", made: Made | None = None) -> str:
    """One self-contained page for *diagnosis*."""
    return _page(title, diagnosis_body(diagnosis, title, made), to_json(diagnosis, made))


def _differences(comparison: Comparison) -> str:
    """The chart of the facts both sides know (with A / B), then a table of those only one side knows."""
    alone = [d for d in comparison.differences if not drawn(d) and (d.a or d.b)]
    table = ""
    if alone:
        rows = ((d.fact, *difference_cells(d)[:2]) for d in alone)
        table = "<h3>Known on one side only</h3>" + _table(("fact", comparison.a_name, comparison.b_name), rows)
    return difference_chart(comparison) + table


def comparison_page(comparison: Comparison, made: Made | None = None) -> str:
    """One self-contained page: which side is slow, the cause and its fix, the inputs; then, folded, why they
    differ, what differs, each side's details and what the sources cannot tell."""
    title = f"schedwatch compare: {comparison.a_name} vs {comparison.b_name}"
    tone = "bad" if comparison.cause is not None else "good"
    answer = [f'<p class="lead"><b>{prose(slow_line(comparison))}</b></p>']
    if comparison.cause is not None:
        answer.append(_finding(comparison.cause, comparison.cause_side or "?", evidence_open=False))
    inputs = "".join(
        f"<br>{_e(name)}: {_e(inputs_of(side))}"
        for name, side in ((comparison.a_name, comparison.a), (comparison.b_name, comparison.b))
    )
    answer.append(f'<p class="dim"><b>Inputs:</b>{inputs}</p>')
    body = [
        f"<h1>{_e(title)}</h1>",
        _made(made),
        f'<section class="answer{"" if tone == "bad" else " good"}">{"".join(answer)}</section>',
    ]
    others = [
        _finding(f, ", ".join(part for part in (name, where(f.workload)) if part), evidence_open=True)
        for name, side in ((comparison.a_name, comparison.a), (comparison.b_name, comparison.b))
        for f in rank_findings(side)
        if f is not comparison.cause
    ]
    why = "".join(f"<p>{prose(sentence)}</p>" for sentence in comparison.explanation) + "".join(others)
    axis_end = thread_seconds([*_all_threads(comparison.a), *_all_threads(comparison.b)])
    sections = [
        Section("why", "Why they differ", why, open=True),
        Section("differs", "What differs", _differences(comparison), open=True),
        Section("side-a", f"{comparison.a_name}: node, processes, threads", _details(comparison.a, axis_end)),
        Section("side-b", f"{comparison.b_name}: node, processes, threads", _details(comparison.b, axis_end)),
        Section(
            "observations",
            "Observations (not a thread-contention cause)",
            "".join(
                f"<h3>{_e(name)}</h3>{_observations(side)}"
                for name, side in ((comparison.a_name, comparison.a), (comparison.b_name, comparison.b))
                if side.observations
            ),
            open=True,
        ),
        Section("notes", "What these sources cannot tell", _list(shared_notes(comparison))),
    ]
    body.extend(_folded(sections))
    return _page(title, body, comparison_to_json(comparison, made))
