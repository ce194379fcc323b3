"""A diagnosis (or a comparison of two) as one self-contained HTML page to paste into a ticket.

Nothing is fetched: the style is inline, the charts are inline SVG, and the diagnosis itself is embedded as JSON
(``<script type="application/json" id="schedwatch-data">``, never executed: the document ``--json`` prints) for
whoever wants the numbers. Every text is escaped, so a tenant's cgroup, container, command or thread name cannot
add markup, a script or a link, and its invisible characters are shown as escapes (``\\x1b``, ``\\u202e``) as the
text report shows them.
The renderer knows nothing of the rules: it draws what the diagnosis holds.

``diagnosis_page(diagnosis, title)`` and ``comparison_page(comparison)`` return the page as a string.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from agent.diagnosis.comparison import Comparison
from agent.diagnosis.facts import NodeView, ThreadView, Workload, WorkloadView
from agent.diagnosis.findings import Diagnosis, Evidence, Finding, Observation, Unchecked
from agent.diagnosis.render.budget import budget_lines
from agent.diagnosis.render.code import code_lines
from agent.diagnosis.render.json_report import comparison_to_json, to_json
from agent.diagnosis.render.numbers import number, plural, with_unit
from agent.diagnosis.render.text import (
    UNNAMED,
    cpu_states,
    difference_cells,
    named_workloads,
    rank_processes,
    rank_threads,
    rank_workloads,
    summary,
    workload_name,
)
from agent.identity.labels import visible

CHART_THREADS = 24  # threads drawn in a chart; the rest are counted
TABLE_ROWS = 40  # processes and threads listed per workload

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1100px;color:#1d232b;
background:#fff;line-height:1.45}
h1{font-size:1.5em;margin:0 0 4px} h2{font-size:1.2em;margin:28px 0 8px;border-bottom:1px solid #d6dbe1}
h3{font-size:1.05em;margin:18px 0 6px} .dim{color:#66707c} .sources{font-size:.9em}
.badge{display:inline-block;border-radius:4px;padding:1px 8px;font-size:.85em;font-weight:600}
.bad{background:#fde3e1;color:#a3170c} .good{background:#dff3e4;color:#17692f} .warn{background:#fff1cf;color:#7a5200}
.card{border:1px solid #d6dbe1;border-left:5px solid #c62f22;border-radius:6px;padding:10px 16px;margin:12px 0}
.card.obs{border-left-color:#d49a00} .card.unchecked{border-left-color:#8a94a0} .card.why{border-left-color:#2a6fdb}
table{border-collapse:collapse;margin:6px 0 10px;font-size:.92em} th,td{padding:3px 10px;text-align:left;
border-bottom:1px solid #eceff2} td.n{text-align:right;font-variant-numeric:tabular-nums}
.fix{background:#eef8f0;border-radius:6px;padding:8px 14px} code,.mono{font-family:ui-monospace,Menlo,monospace}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#1d232b} ul{margin:4px 0 8px}
"""

BADGES = {"bad": "bad", "unsure": "warn", "good": "good"}
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"  # the page may fetch nothing
COLOURS = {"sched_yield": "#c62f22", "futex": "#2a6fdb", "other": "#9aa4ae", "a": "#c62f22", "b": "#2a6fdb"}


def _e(value: object) -> str:
    """Text as HTML that shows it: markup escaped, invisible characters (an ESC, a bidi override) as escapes."""
    return escape(visible(str(value)), quote=True)


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


def _evidence(items: Iterable[Evidence]) -> str:
    rows = "".join(
        f"<tr><td>{_e(item.fact)}</td><td class=n><b>{_e(with_unit(item.value, item.unit))}</b></td>"
        f"<td class=dim>{_e(item.compared_with)}</td></tr>"
        for item in items
    )
    return f"<table><tr><th>evidence</th><th>value</th><th>compared with</th></tr>{rows}</table>" if rows else ""


def _list(items: Iterable[str], ordered: bool = False) -> str:
    tag = "ol" if ordered else "ul"
    inner = "".join(f"<li>{_e(item)}</li>" for item in items)
    return f"<{tag}>{inner}</{tag}>" if inner else ""


def _workload_line(ref: Workload) -> str:
    name = workload_name(ref)
    return name if name == UNNAMED else f"workload: {name}"


def _finding(finding: Finding, where: str | None = None) -> str:
    place = f" in <b>{_e(where)}</b>" if where else ""
    parts = [
        '<div class="card finding">',
        f'<h3><span class="badge bad">{_e(finding.cause.value)} / {_e(finding.mechanism.value)}</span>{place} '
        f'<span class="dim">confidence {_e(finding.confidence.value)}</span></h3>',
        f"<p>{_e(finding.explanation)}</p>",
        f"<p class=dim>{_e(_workload_line(finding.workload))}</p>",
    ]
    if finding.processes:
        parts.append(
            f"<p>processes: <span class=mono>{_e(', '.join(str(pid) for pid in finding.processes))}</span></p>"
        )
    if finding.libraries:
        parts.append(f"<p>libraries: {_e(', '.join(finding.libraries))}</p>")
    parts.append(_evidence(finding.evidence))
    parts.append(
        f'<div class="fix"><b>Fix:</b> {_e(finding.fix.summary)}{_list(finding.fix.steps, ordered=True)}</div>'
    )
    if finding.collect_next:
        parts.append(f"<p><b>To be surer, collect:</b></p>{_list(finding.collect_next)}")
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


def _node(node: NodeView) -> str:
    cells = [
        ("CPUs", "unknown" if node.cpus is None else str(node.cpus)),
        ("load average", "unknown" if node.load_average is None else " ".join(f"{v:.2f}" for v in node.load_average)),
        ("runnable tasks", "unknown" if node.run_queue is None else number(node.run_queue)),
        (
            "context switches",
            "unknown" if node.context_switches_per_second is None else f"{number(node.context_switches_per_second)}/s",
        ),
    ]
    if node.cpu is not None:
        since = " since boot" if node.cpu.since_boot else ""
        cells.extend((f"CPU {name}{since}", f"{value:.1f} %") for name, _short, value in cpu_states(node.cpu))
    rows = "".join(f"<tr><td>{_e(name)}</td><td class=n>{_e(value)}</td></tr>" for name, value in cells)
    return f"<h2>Node</h2><table>{rows}</table>"


def _thread_split(thread: ThreadView) -> tuple[float, float, float]:
    yields = thread.sched_yield_seconds or 0.0
    futex = thread.futex_seconds or 0.0
    other = max((thread.syscall_seconds or 0.0) - yields - futex, 0.0)
    return yields, futex, other


def thread_chart(threads: Sequence[ThreadView], title: str) -> str:
    """Inline SVG: time in sched_yield, futex and other system calls, one bar per thread (most first)."""
    ranked = sorted(threads, key=lambda thread: sum(_thread_split(thread)), reverse=True)[:CHART_THREADS]
    if not ranked or sum(sum(_thread_split(thread)) for thread in ranked) <= 0:
        return ""
    longest = max(sum(_thread_split(thread)) for thread in ranked)
    left, width, bar, gap = 150, 520, 14, 4
    height = 34 + len(ranked) * (bar + gap)
    parts = [
        f'<svg role="img" width="{left + width + 90}" height="{height}">',
        f"<title>{_e(title)}</title>",
    ]
    legend_x = left
    for name in ("sched_yield", "futex", "other"):
        parts.append(f'<rect x="{legend_x}" y="4" width="10" height="10" fill="{COLOURS[name]}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="13">{_e(name)} (s)</text>')
        legend_x += 110
    for index, thread in enumerate(ranked):
        y = 24 + index * (bar + gap)
        label = f"{thread.comm or '?'} {thread.tid if thread.tid is not None else ''}".strip()
        parts.append(f'<text x="{left - 6}" y="{y + 11}" text-anchor="end">{_e(label[:24])}</text>')
        x = float(left)
        for name, seconds in zip(("sched_yield", "futex", "other"), _thread_split(thread), strict=True):
            span = width * seconds / longest
            if span > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{span:.1f}" height="{bar}" fill="{COLOURS[name]}"/>')
            x += span
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 11}">{_e(number(sum(_thread_split(thread))))} s</text>')
    parts.append("</svg>")
    more = len(threads) - len(ranked)
    note = f'<p class="dim">{more:,} more threads not drawn</p>' if more > 0 else ""
    return f"<h3>{_e(title)}</h3>" + "".join(parts) + note


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _known(value: float | None, suffix: str = "") -> str:
    return "" if value is None else f"{number(value)}{suffix}"


def _thread_table(threads: Sequence[ThreadView]) -> str:
    ranked = rank_threads(threads)
    more = len(ranked) - TABLE_ROWS
    rows = (
        (
            "" if t.tid is None else str(t.tid),
            t.comm or "?",
            _known(None if t.sched_yield_calls is None else float(t.sched_yield_calls)),
            _known(t.sched_yield_seconds, " s"),
            _known(None if t.futex_calls is None else float(t.futex_calls)),
            _known(t.futex_seconds, " s"),
            _known(t.futex_max_seconds, " s"),
            "" if t.cpu_percent is None else f"{t.cpu_percent:.1f}",
        )
        for t in ranked[:TABLE_ROWS]
    )
    headers = ("tid", "command", "sched_yield", "in sched_yield", "futex", "in futex", "longest futex", "%CPU")
    note = f'<p class="dim">{more:,} more threads not listed</p>' if more > 0 else ""
    return "<h3>Threads</h3>" + _table(headers, rows) + note


def _workload(workload: WorkloadView, diagnosis: Diagnosis) -> str:
    name = workload_name(workload.ref)
    findings = [finding for finding in diagnosis.findings if finding.workload == workload.ref]
    badge = (
        f'<span class="badge bad">{plural(len(findings), "finding")}</span>'
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
    parts = [f"<h2>{_e(name)} {badge}</h2>", _table(("fact", "value"), [(k, v) for k, v in facts if v])]
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
        parts.append(thread_chart(workload.thread_views, "Time in system calls per thread"))
        parts.append(_thread_table(workload.thread_views))
    if workload.processes:
        ranked = rank_processes(workload.processes)
        parts.append("<h3>Processes</h3>")
        parts.append(
            _table(
                ("pid", "command", "threads", "%CPU", "%sys", "libraries"),
                (
                    (
                        str(p.pid),
                        p.command or p.comm or "?",
                        "" if p.threads is None else str(p.threads),
                        "" if p.cpu_percent is None else f"{p.cpu_percent:.1f}",
                        "" if p.system_percent is None else f"{p.system_percent:.1f}",
                        ", ".join(p.libraries),
                    )
                    for p in ranked[:TABLE_ROWS]
                ),
            )
        )
    for finding in findings:
        parts.append(_finding(finding))
    parts.extend(_unchecked(u) for u in diagnosis.unchecked if u.workload == workload.ref)
    return "".join(parts)


def diagnosis_body(diagnosis: Diagnosis, title: str) -> list[str]:
    """The page's sections for one diagnosis (also used for each side of a comparison)."""
    verdict, tone = summary(diagnosis)
    badge = f'<span class="badge {BADGES[tone]}">{_e(verdict)}</span>'
    body = [f"<h1>{_e(title)} {badge}</h1>"]
    if diagnosis.facts.sources:
        body.append(f'<p class="dim sources">from: {_e("; ".join(diagnosis.facts.sources))}</p>')
    body.append(_node(diagnosis.facts.node))
    known = {workload.ref for workload in diagnosis.facts.workloads}
    body.extend(_workload(workload, diagnosis) for workload in rank_workloads(diagnosis))
    body.extend(_finding(f) for f in diagnosis.findings if f.workload not in known)
    body.extend(_unchecked(u) for u in diagnosis.unchecked if u.workload not in known)
    if diagnosis.observations:
        body.append("<h2>Observations (not a thread-contention cause)</h2>")
        body.extend(_observation(observation) for observation in diagnosis.observations)
    if diagnosis.facts.notes:
        body.append(f"<h2>What these sources cannot tell</h2>{_list(diagnosis.facts.notes)}")
    return body


def diagnosis_page(diagnosis: Diagnosis, title: str = "schedwatch diagnosis") -> str:
    """One self-contained page for *diagnosis*."""
    return _page(title, diagnosis_body(diagnosis, title), to_json(diagnosis))


def difference_chart(comparison: Comparison) -> str:
    """Inline SVG: each difference known on both sides as two bars, A and B, scaled to the larger."""
    rows = [d for d in comparison.differences if d.a is not None and d.b is not None and max(d.a, d.b) > 0]
    if not rows:
        return ""
    left, width, bar = 330, 380, 11
    step = 2 * bar + 12
    height = 30 + len(rows) * step
    parts = [
        f'<svg role="img" width="{left + width + 140}" height="{height}">',
        f"<title>{_e(comparison.a_name)} vs {_e(comparison.b_name)}</title>",
        f'<rect x="{left}" y="4" width="10" height="10" fill="{COLOURS["a"]}"/>',
        f'<text x="{left + 14}" y="13">{_e(comparison.a_name[:40])}</text>',
        f'<rect x="{left + 200}" y="4" width="10" height="10" fill="{COLOURS["b"]}"/>',
        f'<text x="{left + 214}" y="13">{_e(comparison.b_name[:40])}</text>',
    ]
    for index, difference in enumerate(rows):
        y = 24 + index * step
        assert difference.a is not None and difference.b is not None
        largest = max(difference.a, difference.b)
        parts.append(f'<text x="{left - 8}" y="{y + bar + 4}" text-anchor="end">{_e(difference.fact)}</text>')
        for offset, (side, value) in enumerate((("a", difference.a), ("b", difference.b))):
            span = width * value / largest
            top = y + offset * bar
            parts.append(f'<rect x="{left}" y="{top}" width="{span:.1f}" height="{bar - 1}" fill="{COLOURS[side]}"/>')
            parts.append(
                f'<text x="{left + span + 4:.1f}" y="{top + bar - 2}">{_e(with_unit(value, difference.unit))}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def comparison_page(comparison: Comparison) -> str:
    """One self-contained page: why A and B differ, the cause and fix, the differences, then each side."""
    title = f"schedwatch compare: {comparison.a_name} vs {comparison.b_name}"
    body = [f"<h1>{_e(title)}</h1>", '<div class="card why"><h3>Why they differ</h3>']
    body.extend(f"<p>{_e(sentence)}</p>" for sentence in comparison.explanation)
    body.append("</div>")
    if comparison.cause is not None:
        body.append(_finding(comparison.cause, comparison.cause_side))
    body.append("<h2>What differs</h2>")
    body.append(difference_chart(comparison))
    body.append(
        _table(
            ("fact", comparison.a_name, comparison.b_name, "A / B"),
            ((d.fact, *difference_cells(d)) for d in comparison.differences),
        )
    )
    body.extend(diagnosis_body(comparison.a, f"A: {comparison.a_name}"))
    body.extend(diagnosis_body(comparison.b, f"B: {comparison.b_name}"))
    return _page(title, body, comparison_to_json(comparison))
