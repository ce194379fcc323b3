"""How schedwatch's command lines are parsed and how their helps read.

A bad flag is one line on stderr (exit 2), not the usage text before it (:class:`ArgumentParser`). A subcommand's
``--help`` (:class:`CommandParser`) shows its own flags first, grouped, then two or three examples; the agent's
flags it also takes (collection, runtime, export, serving, logging, client: agent/commands/agent_flags.py adds them)
sit in groups of their own that only ``--help-all`` lists, so that a command's help fits a screen.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr (exit 2), not the whole usage text before it."""

    def error(self, message: str) -> NoReturn:
        """Print '<prog>: error: <message>' and exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


@dataclass(frozen=True)
class Example:
    """A command line a help shows, and what it does."""

    line: str  # "schedwatch diagnose --pod pipeline-0 --duration 30"
    does: str  # "one pod, for 30 s"


class _HelpAll(argparse.Action):
    """--help-all: the help with the agent's flags too, then exit."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        assert isinstance(parser, CommandParser)
        parser._print_message(parser.format_full_help(), sys.stdout)
        parser.exit()


class CommandParser(ArgumentParser):
    """A subcommand's parser: its own flags and examples in --help; the agent's flags in --help-all."""

    def __init__(self, *args: Any, examples: Sequence[Example] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.examples = tuple(examples)
        self._agent_groups: list[argparse._ArgumentGroup] = []
        if self.add_help:
            self.add_argument("--help-all", action=_HelpAll, help="the help with every flag, the agent's too")

    def agent_group(self, title: str, description: str | None = None) -> argparse._ArgumentGroup:
        """A group of the agent's flags: listed by --help-all, not by --help."""
        group = self.add_argument_group(title, description)
        self._agent_groups.append(group)
        return group

    def agent_flag_count(self) -> int:
        """How many of the agent's flags only --help-all lists."""
        return sum(
            1 for group in self._agent_groups for action in group._group_actions if action.help != argparse.SUPPRESS
        )

    def format_help(self) -> str:
        """Usage, what the command is for, its own flags by group, its examples, and where the agent's flags are."""
        return self._help(full=False)

    def format_full_help(self) -> str:
        """The help with every flag the command takes, the agent's too, by group."""
        return self._help(full=True)

    def _help(self, full: bool) -> str:
        agent = {id(group) for group in self._agent_groups}
        own = [group for group in self._action_groups if id(group) not in agent and group is not self._optionals]
        groups = [*own, self._optionals, *(self._agent_groups if full else ())]
        shown = [action for group in groups for action in group._group_actions]
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, shown, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for group in groups:
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(group._group_actions)
            formatter.end_section()
        text = formatter.format_help()
        if self.examples:
            text += "\n" + examples_text(self.examples)
        hidden = self.agent_flag_count()
        if hidden and not full:
            names = ", ".join((group.title or "").split(":")[0] for group in self._agent_groups)
            text += (
                f"\nthe agent's flags it takes too ({hidden}; {names}):\n  {self.prog} --help-all\n"
                "every flag and its SCHEDWATCH_* variable: docs/configuration.md\n"
            )
        return text


EXAMPLE_WIDTH = 78  # an example and its comment on one line up to this width, else the comment on the next


def examples_text(examples: Sequence[Example]) -> str:
    """The examples block of a help: each command line, then what it does after '#', aligned where that fits in
    EXAMPLE_WIDTH columns; a line too long for its comment has it on the next line."""

    def fits(example: Example, width: int) -> bool:
        return 2 + max(width, len(example.line)) + 4 + len(example.does) <= EXAMPLE_WIDTH

    width = max((len(example.line) for example in examples if fits(example, len(example.line))), default=0)
    while width and not all(fits(e, width) for e in examples if fits(e, len(e.line))):
        width -= 1
    lines = []
    for example in examples:
        if fits(example, width):
            lines.append(f"  {example.line:<{width}}  # {example.does}")
        else:
            lines.extend((f"  {example.line}", f"      # {example.does}"))
    return "examples:\n" + "\n".join(lines) + "\n"
