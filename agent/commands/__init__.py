"""The subcommands of `schedwatch`, one module each, registered by one small protocol.

A command module defines ``COMMAND``: its name, a one-line help (what it is for), the first lines of its own
``--help``, its examples, how it adds its flags to its parser (agent/commands/parser.py), and how it runs on the
parsed arguments (returning the exit status). `agent.cli` only builds the parser from this table and calls the one
chosen.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from agent.commands.parser import CommandParser, Example

SAVED = "on outputs you saved (no root, no BPF, nothing to install on the slow machine)"
LIVE = "on this machine, now (as root, or with CAP_BPF and CAP_PERFMON)"


@dataclass(frozen=True)
class Command:
    """One subcommand."""

    name: str
    help: str  # its line in `schedwatch --help`: what it is for
    description: str  # the first lines of its own --help
    add_arguments: Callable[[CommandParser], None]
    run: Callable[[argparse.Namespace, argparse.ArgumentParser], int]  # the parser, for its one-line usage errors
    examples: tuple[Example, ...] = ()
    section: str = LIVE  # where `schedwatch --help` lists it


def registry() -> tuple[Command, ...]:
    """Every subcommand, in the order `schedwatch --help` lists them (within their section)."""
    from agent.commands import analyze, check, compare, diagnose, profile, run, top, verify

    return (
        analyze.COMMAND,
        compare.COMMAND,
        diagnose.COMMAND,
        top.COMMAND,
        profile.COMMAND,
        verify.COMMAND,
        check.COMMAND,
        run.COMMAND,
    )
