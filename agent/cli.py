"""The `schedwatch` command: one subcommand per module of agent.commands, built from their table
(:func:`agent.commands.registry`); this module only builds the parser and runs the one chosen."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence

from agent import __version__
from agent.commands import Command, registry
from agent.commands.parser import ArgumentParser, CommandParser

ABOUT = (
    "schedwatch makes hidden CPU contention visible per container (sched_yield storms, futex waits, run-queue "
    "waits, throttling) and names its cause and its fix."
)


def listing(commands: Sequence[Command]) -> str:
    """`schedwatch --help`'s list: every command with what it is for, by section, in the registry's order."""
    width = max(len(command.name) for command in commands)
    lines = textwrap.wrap(ABOUT, 78)
    for section in dict.fromkeys(command.section for command in commands):
        lines.append(f"\n{section}:")
        lines.extend(f"  {c.name:<{width}}  {c.help}" for c in commands if c.section == section)
    lines.append("\nschedwatch COMMAND --help: its flags and examples; documentation: docs/README.md")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `schedwatch` console script; returns the exit status."""
    commands = registry()
    parser = ArgumentParser(
        prog="schedwatch",
        usage="schedwatch [-h] [--version] COMMAND [FLAGS ...]",
        description=listing(commands),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"schedwatch {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser, help=argparse.SUPPRESS
    )
    for command in commands:
        subparser = subparsers.add_parser(
            command.name,
            prog=f"schedwatch {command.name}",
            help=command.help,
            description=command.description,
            examples=command.examples,
        )
        command.add_arguments(subparser)
        subparser.set_defaults(command_run=command.run, command_parser=subparser)
    args = parser.parse_args(argv)
    return int(args.command_run(args, args.command_parser))
