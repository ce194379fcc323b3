"""`schedwatch compare A B`: two environments (each a file, a directory of files, or a saved `schedwatch diagnose
--json` report) diagnosed side by side: what differs, why it explains the gap, then the cause and the fix.
`--a FILE… --b FILE…` gives several files per side."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.commands import Command
from agent.commands.output import fail, print_json, to_stdout, write_page

NAME = "compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The two sides and the output wanted."""
    parser.add_argument("sides", nargs="*", type=Path, metavar="A B", help="the slow and the fast environment")
    parser.add_argument("--a", nargs="+", type=Path, default=[], metavar="FILE", help="files of environment A")
    parser.add_argument("--b", nargs="+", type=Path, default=[], metavar="FILE", help="files of environment B")
    parser.add_argument("--a-name", metavar="NAME", help="what to call A (default: its file or directory name)")
    parser.add_argument("--b-name", metavar="NAME", help="what to call B")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON (schedwatch.comparison/v1)")
    parser.add_argument("--html", type=Path, metavar="OUT", help="also write a self-contained HTML report to OUT")


def _sides(args: argparse.Namespace) -> tuple[list[Path], list[Path]] | str:
    if args.sides and (args.a or args.b):
        return "give A and B either as two paths or with --a/--b, not both"
    if args.sides:
        if len(args.sides) != 2:
            return f"give two environments, A and B (got {len(args.sides)}); several files per side with --a/--b"
        return [args.sides[0]], [args.sides[1]]
    if not args.a or not args.b:
        return "give two environments: `schedwatch compare A B` or `--a FILE... --b FILE...`"
    return list(args.a), list(args.b)


def _name(paths: list[Path], given: str | None, fallback: str) -> str:
    if given:
        return given
    if len(paths) == 1:
        return paths[0].stem or fallback
    return fallback


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Read both sides, diagnose each, compare, print (and write) the report."""
    from agent.diagnosis.comparison import compare
    from agent.diagnosis.inputs.artifacts import OfflineError, read_environment
    from agent.diagnosis.render.html_page import comparison_page
    from agent.diagnosis.render.json_report import comparison_to_json
    from agent.diagnosis.render.text import make_console, render_comparison_text
    from agent.diagnosis.rules import diagnose

    sides = _sides(args)
    if isinstance(sides, str):
        return fail(NAME, sides)
    paths_a, paths_b = sides
    name_a, name_b = _name(paths_a, args.a_name, "A"), _name(paths_b, args.b_name, "B")
    if name_a == name_b:
        name_a, name_b = f"A ({name_a})", f"B ({name_b})"
    try:
        facts_a, facts_b = read_environment(paths_a), read_environment(paths_b)
    except OfflineError as error:
        return fail(NAME, str(error))
    comparison = compare(name_a, name_b, diagnose(facts_a), diagnose(facts_b))
    if args.html is not None and (problem := write_page(args.html, comparison_page(comparison))):
        return fail(NAME, problem)
    if args.json:
        return to_stdout(lambda: print_json(comparison_to_json(comparison)))
    return to_stdout(lambda: render_comparison_text(comparison, make_console()))


COMMAND = Command(
    name=NAME,
    help="diagnose two environments side by side and explain what differs",
    description=__doc__,
    add_arguments=add_arguments,
    run=run,
)
