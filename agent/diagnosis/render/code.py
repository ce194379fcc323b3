"""Where a workload's CPU went and who called sched_yield and futex waits, as the reports print it: the busiest
library with its busiest functions, then the kernel, Python and the rest; each call site by function and library.
Only what the facts hold; () when they hold no code rows."""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent.diagnosis import pools
from agent.diagnosis.facts import CodeShare, WorkloadView, by_library
from agent.diagnosis.render.numbers import number

KERNEL = "[kernel]"
FUNCTIONS_SHOWN = 3  # functions named for the busiest library
LIBRARIES_SHOWN = 3  # libraries named after it
SITES_SHOWN = 3
_PYTHON = re.compile(r"^(?:lib)?python\d")
_C_LIBRARY = re.compile(r"^(?:libc\.so|libc-\d|libpthread[.-]|ld-musl-)")


def percent(part: float, whole: float) -> str:
    """*part* of *whole* as a whole percentage (one decimal below 1 %)."""
    share = 100 * part / whole if whole else 0.0
    return f"{share:.1f} %" if 0 < share < 1 else f"{share:.0f} %"


def library_title(library: str, version: str | None) -> str:
    """How a library is named in a sentence: the kernel, Python, or its file name with its version and pool."""
    if library == KERNEL:
        return "the kernel"
    if _PYTHON.match(library):
        return f"Python ({library})"
    pool = pools.implementation_of(library)
    shown = f"{library} {version}" if version and version not in library else library
    return f"{shown} ({pool.implementation}'s pool)" if pool is not None else shown


def _functions(rows: Sequence[CodeShare], total: float) -> str:
    named = [row for row in rows if row.function]
    shown = ", ".join(f"{row.function} {percent(row.count, total)}" for row in named[:FUNCTIONS_SHOWN])
    unnamed = sum(row.count for row in rows if not row.function)
    if unnamed:
        shown += (", " if shown else "") + f"no symbol {percent(unnamed, total)}"
    return shown


def samples_line(workload: WorkloadView) -> str | None:
    """The on-CPU samples: "72 % in libopenblas…: blas_thread_server 41 %, …; the kernel 12 % (…); Python 3 %"."""
    rows, total = workload.cpu_samples, workload.cpu_samples_total
    if not rows or not total:
        return None
    ranked = sorted(by_library(rows).items(), key=lambda item: -sum(row.count for row in item[1]))
    (top, top_rows), rest = ranked[0], ranked[1 : 1 + LIBRARIES_SHOWN]
    top_count = sum(row.count for row in top_rows)
    parts = [f"{percent(top_count, total)} in {library_title(top, top_rows[0].version)}: {_functions(top_rows, total)}"]
    for library, library_rows in rest:
        count = sum(row.count for row in library_rows)
        busiest = library_rows[0]
        detail = f" ({busiest.function} {percent(busiest.count, total)})" if busiest.function else ""
        parts.append(f"{library_title(library, busiest.version)} {percent(count, total)}{detail}")
    shown = top_count + sum(sum(row.count for row in library_rows) for _library, library_rows in rest)
    if total - shown > 0:
        parts.append(f"other code {percent(total - shown, total)}")
    return f"on-CPU samples ({number(total)}): " + "; ".join(parts)


def sites_line(sites: tuple[CodeShare, ...] | None, call: str) -> str | None:
    """Who made the calls: "sched_yield called from blas_thread_server in libopenblas… 100 %"."""
    if not sites:
        return None
    total = sum(site.count for site in sites)
    shown = []
    for site in sites[:SITES_SHOWN]:
        where = library_title(site.library, site.version)
        if _C_LIBRARY.match(site.library):
            where += ", the C library itself: its caller is not told"
        shown.append(f"{site.function or 'no symbol'} in {where} {percent(site.count, total)}")
    return f"{call} ({number(total)}) from " + "; ".join(shown)


def code_lines(workload: WorkloadView) -> tuple[str, ...]:
    """Every code line the facts hold."""
    lines = (
        samples_line(workload),
        sites_line(workload.yield_sites, "sched_yield calls"),
        sites_line(workload.futex_sites, "futex waits"),
    )
    return tuple(line for line in lines if line is not None)
