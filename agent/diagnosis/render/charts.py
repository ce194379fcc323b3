"""The page's charts, as inline SVG: time in system calls per thread, and each fact of a comparison for A and B.

Each chart has an axis from 0 to a round number, shared by what it compares: A's and B's bars of one fact; every
thread of both sides of a comparison (the caller gives the axis' end). Threads with no time in system calls are
counted, not drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from agent.diagnosis.comparison import Comparison, Difference
from agent.diagnosis.facts import ThreadView
from agent.diagnosis.render.markup import shown as _e
from agent.diagnosis.render.numbers import number, with_unit
from agent.diagnosis.render.shared import difference_cells

CHART_THREADS = 24  # threads drawn in a chart; the rest are counted
COLOURS = {"sched_yield": "#c62f22", "futex": "#2a6fdb", "other": "#9aa4ae", "a": "#c62f22", "b": "#2a6fdb"}


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k at least *value*: an axis' end that reads well."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1.0, 2.0, 2.5, 5.0, 10.0) if step * power >= value * (1 - 1e-12))


def _axis(left: float, width: float, y: float, top: float, end: float, unit: str, ticks: int = 4) -> list[str]:
    """An axis from 0 to *end* along *width*, with its tick labels under *y* and grid lines up to *top*."""
    parts = [f'<line x1="{left}" y1="{y}" x2="{left + width}" y2="{y}" stroke="#9aa4ae"/>']
    for index in range(ticks + 1):
        x = left + width * index / ticks
        value = end * index / ticks
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{y + 3}" stroke="#eceff2"/>')
        label = with_unit(value, unit) if index == ticks else number(value)
        parts.append(f'<text class="axis" x="{x:.1f}" y="{y + 13}" text-anchor="middle">{_e(label)}</text>')
    return parts


def _thread_split(thread: ThreadView) -> tuple[float, float, float]:
    yields = thread.sched_yield_seconds or 0.0
    futex = thread.futex_seconds or 0.0
    other = max((thread.syscall_seconds or 0.0) - yields - futex, 0.0)
    return yields, futex, other


def thread_seconds(threads: Iterable[ThreadView]) -> float:
    """The longest time in system calls of one thread among *threads*: what a chart's shared axis must reach."""
    return max((sum(_thread_split(thread)) for thread in threads), default=0.0)


def thread_chart(threads: Sequence[ThreadView], title: str, axis_end: float | None = None) -> str:
    """Inline SVG: time in sched_yield, futex and other system calls, one bar per thread (most first), on an axis
    in seconds that ends at *axis_end* (shared by the charts set side by side) or this chart's longest bar."""
    drawn = [thread for thread in threads if sum(_thread_split(thread)) > 0]
    ranked = sorted(drawn, key=lambda thread: sum(_thread_split(thread)), reverse=True)[:CHART_THREADS]
    if not ranked:
        return ""
    end = nice_ceiling(axis_end if axis_end else thread_seconds(ranked))
    left, width, bar, gap = 150, 560, 14, 4
    bottom = 24 + len(ranked) * (bar + gap)
    parts = [f'<svg role="img" width="{left + width + 90}" height="{bottom + 20}">', f"<title>{_e(title)}</title>"]
    legend_x = left
    for name in ("sched_yield", "futex", "other"):
        parts.append(f'<rect x="{legend_x}" y="4" width="10" height="10" fill="{COLOURS[name]}"/>')
        parts.append(f'<text x="{legend_x + 14}" y="13">{_e(name)}</text>')
        legend_x += 110
    parts.extend(_axis(left, width, bottom, 20, end, "s"))
    for index, thread in enumerate(ranked):
        y = 24 + index * (bar + gap)
        label = f"{thread.comm or '?'} {thread.tid if thread.tid is not None else ''}".strip()
        parts.append(f'<text x="{left - 6}" y="{y + 11}" text-anchor="end">{_e(label[:24])}</text>')
        x = float(left)
        for name, seconds in zip(("sched_yield", "futex", "other"), _thread_split(thread), strict=True):
            span = width * seconds / end
            if span > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{span:.1f}" height="{bar}" fill="{COLOURS[name]}"/>')
            x += span
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 11}">{_e(number(sum(_thread_split(thread))))} s</text>')
    parts.append("</svg>")
    notes = []
    if len(drawn) > len(ranked):
        notes.append(f"{len(drawn) - len(ranked):,} more threads not drawn")
    if len(threads) > len(drawn):
        notes.append(f"{len(threads) - len(drawn):,} threads with no time in system calls")
    note = f'<p class="dim">{"; ".join(notes)}</p>' if notes else ""
    return f"<h3>{_e(title)}</h3>" + "".join(parts) + note


def _difference_row(difference: Difference, y: float, left: float, width: float, bar: float) -> list[str]:
    """One fact: its name, A's and B's bars on one axis from 0 to a round number at least the larger."""
    assert difference.a is not None and difference.b is not None
    end = nice_ceiling(max(difference.a, difference.b))
    parts = [f'<text x="{left - 8}" y="{y + bar + 4}" text-anchor="end">{_e(difference.fact)}</text>']
    if difference.ratio is not None:
        ratio = _e(difference_cells(difference)[2])
        parts.append(f'<text x="{left + width + 70}" y="{y + bar + 4}" text-anchor="end">{ratio}</text>')
    for offset, (side, value) in enumerate((("a", difference.a), ("b", difference.b))):
        span = width * value / end
        top = y + offset * bar
        parts.append(f'<rect x="{left}" y="{top}" width="{span:.1f}" height="{bar - 1}" fill="{COLOURS[side]}"/>')
        parts.append(
            f'<text x="{left + span + 4:.1f}" y="{top + bar - 2}">{_e(with_unit(value, difference.unit))}</text>'
        )
    parts.extend(_axis(left, width, y + 2 * bar + 1, y, end, difference.unit, ticks=2))
    return parts


def difference_chart(comparison: Comparison) -> str:
    """Inline SVG: each difference known on both sides as two bars, A and B, on one axis per fact."""
    rows = [d for d in comparison.differences if drawn(d)]
    if not rows:
        return ""
    left, width, bar = 330, 380, 11
    step = 2 * bar + 28
    height = 30 + len(rows) * step
    parts = [
        f'<svg role="img" width="{left + width + 140}" height="{height}">',
        f"<title>{_e(comparison.a_name)} vs {_e(comparison.b_name)}</title>",
        f'<rect x="{left}" y="4" width="10" height="10" fill="{COLOURS["a"]}"/>',
        f'<text x="{left + 14}" y="13">{_e(comparison.a_name[:40])}</text>',
        f'<rect x="{left + 200}" y="4" width="10" height="10" fill="{COLOURS["b"]}"/>',
        f'<text x="{left + 214}" y="13">{_e(comparison.b_name[:40])}</text>',
        f'<text x="{left + width + 70}" y="13" text-anchor="end">A / B</text>',
    ]
    for index, difference in enumerate(rows):
        parts.extend(_difference_row(difference, 24 + index * step, left, width, bar))
    parts.append("</svg>")
    return "".join(parts)


def drawn(difference: Difference) -> bool:
    """Known on both sides and not 0 on both: a pair of bars in the chart."""
    return difference.a is not None and difference.b is not None and max(difference.a, difference.b) > 0
