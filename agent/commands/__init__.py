"""The subcommands of `schedwatch`, one module each, registered by one small protocol.

A command module defines ``COMMAND``: its name, a one-line help, how it adds its flags to its parser, and how it
runs on the parsed arguments (returning the exit status). `agent.cli` only builds the parser from this table and
calls the one chosen.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One subcommand."""

    name: str
    help: str
    description: str | None
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, argparse.ArgumentParser], int]  # the parser, for its one-line usage errors


def registry() -> tuple[Command, ...]:
    """Every subcommand, in the order `schedwatch --help` lists them."""
    from agent.commands import analyze, check, compare, diagnose, profile, run, top, verify

    return (
        run.COMMAND,
        check.COMMAND,
        diagnose.COMMAND,
        top.COMMAND,
        profile.COMMAND,
        verify.COMMAND,
        analyze.COMMAND,
        compare.COMMAND,
    )
