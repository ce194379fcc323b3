"""How `schedwatch top` shows its rows: a rich table on a terminal, plain lines when piped."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from agent.top.table import COLUMNS, Column, Row, cells

HELP = "sort: " + " ".join(f"{column.key}={column.name}" for column in COLUMNS) + "  q=quit"


def plain(table: Sequence[Row], by: Column, title: str) -> str:
    """The rows as aligned text lines under a header (one snapshot)."""
    grid = [[column.header for column in COLUMNS], *(cells(item) for item in table)]
    widths = [max(len(line[index]) for line in grid) for index in range(len(COLUMNS))]
    lines = [f"{title}  sorted by {by.name}"]
    for line in grid:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return "\n".join(lines)


def rich_table(table: Sequence[Row], by: Column, title: str, width: int) -> Table:
    """The rows as a rich Table *width* characters wide at most; the sorted column's header is marked, and names
    too long for the width keep their end (where workloads differ) after a leading "…"."""
    grid = [cells(item) for item in table]
    headers = [f"{column.header}▼" if column is by else column.header for column in COLUMNS]
    widths = [max([len(header), *(len(line[i]) for line in grid)]) for i, header in enumerate(headers)]
    room = max(width - sum(widths[1:]) - 2 * len(COLUMNS), len(headers[0]))  # each cell is padded by 1 each side
    for line in grid:
        if len(line[0]) > room:
            line[0] = "…" + line[0][-(room - 1) :]
    view = Table(title=title, caption=HELP, expand=False, box=None, header_style="bold reverse")
    for index, header in enumerate(headers):
        # Every other column keeps its width; a narrow terminal shortens the workload names instead.
        view.add_column(
            header,
            justify="left" if index in (0, len(COLUMNS) - 1) else "right",
            min_width=None if index == 0 else widths[index],
        )
    for line in grid:
        view.add_row(*(escape(cell) for cell in line))  # names are a tenant's: never rich markup
    return view
