"""The `schedwatch` command: one subcommand per module of agent.commands (run, check, diagnose, verify, analyze,
compare); this module only builds the parser from their table and runs the one chosen."""

from __future__ import annotations

from collections.abc import Sequence

from agent import __version__, config
from agent.commands import registry


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `schedwatch` console script; returns the exit status."""
    parser = config.ArgumentParser(prog="schedwatch", description=__doc__)
    parser.add_argument("--version", action="version", version=f"schedwatch {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in registry():
        subparser = subparsers.add_parser(command.name, help=command.help, description=command.description)
        command.add_arguments(subparser)
        subparser.set_defaults(command_run=command.run, command_parser=subparser)
    args = parser.parse_args(argv)
    return int(args.command_run(args, args.command_parser))
