"""`schedwatch compare A B`: two environments (each a file, a directory of files, or a saved `schedwatch diagnose
--json` report) diagnosed side by side: which one is slow, what differs, why it explains the gap, then the cause and
the fix. `--a FILE… --b FILE…` gives several files per side; --cpus and --workers say what the files of the side
with the cause do not."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from agent.commands import SAVED, Command
from agent.commands.output import add_known_arguments, add_output_arguments, deliver, fail, made_now, told_of
from agent.commands.parser import CommandParser, Example

NAME = "compare"
SEPARATORS = "_-. "


def add_arguments(parser: CommandParser) -> None:
    """The two sides, what the user knows that the files do not say, and the output wanted."""
    parser.add_argument(
        "sides", nargs="*", type=Path, metavar="A B", help="the two environments: a file, a directory or - (stdin)"
    )
    sides = parser.add_argument_group("several files per side")
    sides.add_argument("--a", nargs="+", type=Path, default=[], metavar="FILE", help="the files of environment A")
    sides.add_argument("--b", nargs="+", type=Path, default=[], metavar="FILE", help="the files of environment B")
    sides.add_argument("--a-name", metavar="NAME", help="what to call A (default: what its file names share)")
    sides.add_argument("--b-name", metavar="NAME", help="what to call B")
    add_known_arguments(parser, "the side with the cause")
    add_output_arguments(parser, "the comparison")


def _sides(args: argparse.Namespace) -> tuple[list[Path], list[Path]] | str:
    if args.sides and (args.a or args.b):
        return "give A and B either as two paths or with --a/--b, not both"
    if args.sides:
        if len(args.sides) != 2:
            return f"give two environments, A and B (got {len(args.sides)}); several files per side with --a/--b"
        paths_a, paths_b = [args.sides[0]], [args.sides[1]]
    elif not args.a or not args.b:
        return "give two environments: `schedwatch compare A B` or `--a FILE... --b FILE...`"
    else:
        paths_a, paths_b = list(args.a), list(args.b)
    if [*paths_a, *paths_b].count(Path("-")) > 1:
        return "standard input (-) can be read once: give it for one side, the other as files"
    return paths_a, paths_b


def _words(path: Path) -> list[str]:
    """The words of a file's name without its suffix (a directory's whole name): gcp_perf_trace_s.txt -> gcp, perf,
    trace, s."""
    stem = "stdin" if path == Path("-") else (path.name if path.is_dir() else path.stem)
    for separator in SEPARATORS[1:]:
        stem = stem.replace(separator, SEPARATORS[0])
    return [word for word in stem.split(SEPARATORS[0]) if word]


def _tool_words() -> set[str]:
    """The words of the formats' names (perf, trace, s, top, strace, c, ...): what a file's name says about the tool,
    not about its environment."""
    from agent.diagnosis.inputs.artifacts import FORMATS

    return {word for fmt in FORMATS for word in re.split(r"[^a-z0-9]+", fmt.name.lower()) if word}


def side_names(paths_a: list[Path], paths_b: list[Path]) -> tuple[str, str]:
    """What to call each side: the words every file of that side has in its name and no file of the other side has,
    less the words naming a tool (gcp_perf_trace_s.txt and gcp_top.txt against baremetal_perf_trace_s.txt: gcp and
    baremetal); a side whose names share no such word is A (or B)."""
    tools = _tool_words()

    def name(own: list[Path], other: list[Path], fallback: str) -> str:
        words = [_words(path) for path in own]
        theirs = {word for path in other for word in _words(path)}
        shared = [word for word in words[0] if all(word in others for others in words[1:]) and word not in theirs]
        told = [word for word in shared if word.lower() not in tools] or shared
        return "_".join(dict.fromkeys(told)) or fallback

    return name(paths_a, paths_b, "A"), name(paths_b, paths_a, "B")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Read both sides, diagnose each, compare, print (and write) the report."""
    from agent.diagnosis.comparison import compare_told
    from agent.diagnosis.inputs.artifacts import OfflineError, read_environment
    from agent.diagnosis.render.html_page import comparison_page
    from agent.diagnosis.render.json_report import comparison_to_json
    from agent.diagnosis.render.text import make_console, render_comparison_text

    sides = _sides(args)
    if isinstance(sides, str):
        return fail(NAME, sides)
    paths_a, paths_b = sides
    found_a, found_b = side_names(paths_a, paths_b)
    name_a, name_b = args.a_name or found_a, args.b_name or found_b
    if name_a == name_b:
        name_a, name_b = f"A ({name_a})", f"B ({name_b})"
    try:
        facts_a, facts_b = read_environment(paths_a), read_environment(paths_b)
    except OfflineError as error:
        return fail(NAME, str(error))
    comparison = compare_told(name_a, name_b, facts_a, facts_b, told_of(args))
    made = made_now(NAME)
    return deliver(
        NAME,
        args,
        page=lambda: comparison_page(comparison, made),
        document=lambda: comparison_to_json(comparison, made),
        draw=lambda: render_comparison_text(comparison, make_console(), made=made),
    )


COMMAND = Command(
    name=NAME,
    help="which of two machines is slow, why, and the fix",
    description="Diagnose two environments side by side (each a file, a directory of files, or a saved diagnose "
    "--json): which one is slow, what differs, why that explains the gap, the cause and the fix.",
    add_arguments=add_arguments,
    run=run,
    examples=(
        Example("schedwatch compare gcp/ baremetal/ --html compare.html", "two directories; a page to share"),
        Example(
            "schedwatch compare --a gcp_perf.txt gcp_top.txt --b bm_perf.txt --cpus 32 --workers 14",
            "the fix with N",
        ),
    ),
    section=SAVED,
)
