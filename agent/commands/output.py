"""What analyze and compare share: their output and "what you know" flags, the one-line error, JSON on stdout,
and the HTML page written to a file."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent import __version__
from agent.diagnosis.inputs.told import MAX_CPUS, Told
from agent.diagnosis.render.provenance import Made

ERROR_STATUS = 2


def _positive(maximum: int) -> Callable[[str], int]:
    def convert(text: str) -> int:
        if not text.isdigit() or not 1 <= int(text) <= maximum:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number from 1 to {maximum}")
        return int(text)

    return convert


def add_known_arguments(parser: argparse.ArgumentParser, whose: str) -> None:
    """--cpus and --workers: what the user knows of *whose* machine that the saved outputs may not say."""
    group = parser.add_argument_group(
        "what you know that the files may not say (the fix then gives its number)",
    )
    group.add_argument(
        "--cpus",
        type=_positive(MAX_CPUS),
        metavar="N",
        help=f"the CPUs {whose} may use (nproc there); wins over what the files show",
    )
    group.add_argument(
        "--workers", type=_positive(MAX_CPUS), metavar="N", help="its pool's worker processes, e.g. Pool(14)"
    )


def add_output_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """--json and --html OUT."""
    group = parser.add_argument_group("output (default: a tree on the terminal)")
    group.add_argument("--json", action="store_true", help=f"print {what} as JSON (docs/schemas/)")
    group.add_argument("--html", type=Path, metavar="OUT", help="also write a self-contained HTML page to OUT")


def told_of(args: argparse.Namespace) -> Told:
    """What --cpus and --workers told."""
    return Told(cpus=args.cpus, workers=args.workers)


def made_now(command: str) -> Made:
    """Which schedwatch made a report, when, with which command."""
    return Made.now(__version__, command)


def fail(command: str, message: str) -> int:
    """Print the one-line error of *command* and give the exit status."""
    print(f"schedwatch {command}: {message}", file=sys.stderr)
    return ERROR_STATUS


def print_json(document: dict[str, Any]) -> None:
    """*document* on stdout, indented."""
    json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def write_page(path: Path, page: str) -> str | None:
    """Write the HTML *page* to *path*; the error line when it cannot be written, else None."""
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as error:
        return f"{path}: cannot write the HTML report ({error.strerror or error})"
    print(f"wrote {path}", file=sys.stderr)
    return None


def to_stdout(draw: Callable[[], None]) -> int:
    """Run *draw* (which prints the report); a reader that stops early (`| head`) is not an error. Exit status 0."""
    try:
        draw()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def deliver(
    command: str,
    args: argparse.Namespace,
    page: Callable[[], str],
    document: Callable[[], dict[str, Any]],
    draw: Callable[[], None],
) -> int:
    """Give a report as the flags of :func:`add_output_arguments` ask: the HTML *page* written to --html OUT when
    given (a page that cannot be written fails *command*), then the JSON *document* with --json, else *draw*'s tree."""
    if args.html is not None and (problem := write_page(args.html, page())):
        return fail(command, problem)
    if args.json:
        return to_stdout(lambda: print_json(document()))
    return to_stdout(draw)
