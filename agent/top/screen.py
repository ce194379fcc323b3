"""How `schedwatch top` shows its rows: a rich table on a terminal, plain lines when piped."""

from __future__ import annotations

from collections.abc import Sequence

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


def rich_table(table: Sequence[Row], by: Column, title: str) -> Table:
    """The rows as a rich Table; the sorted column's header is marked."""
    view = Table(title=title, caption=HELP, expand=False, box=None, header_style="bold reverse")
    for column in COLUMNS:
        header = f"{column.header}▼" if column is by else column.header
        view.add_column(header, justify="left" if column.name in ("name", "finding") else "right", no_wrap=True)
    for item in table:
        view.add_row(*cells(item))
    return view
