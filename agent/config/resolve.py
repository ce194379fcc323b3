"""A flag's value: from the command line, else its environment variable, else a deprecated older variable, else its
default; and which deprecated variables are set."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.config.flag import NOT_GIVEN, Flag
from agent.config.table import FLAGS


class ConfigError(ValueError):
    """Settings that parse but do not fit together; the message is one line saying what to do."""


def given(args: argparse.Namespace, flags: Sequence[Flag]) -> list[Flag]:
    """The *flags* that were on the command line (not those taken from a variable or their default)."""
    return [flag for flag in flags if getattr(args, flag.dest, NOT_GIVEN) is not NOT_GIVEN]


def resolve(args: argparse.Namespace, flags: Sequence[Flag]) -> dict[str, Any]:
    """Each flag's value by its dest: from the command line, else its variable, else a deprecated variable, else
    its default. A flag the parser does not have takes its default (its variable belongs to another command).
    Raises ConfigError naming the variable whose text is bad."""
    values: dict[str, Any] = {}
    for flag in flags:
        value = getattr(args, flag.dest) if hasattr(args, flag.dest) else flag.default
        if value is NOT_GIVEN:
            value = flag.default
            for variable in (flag.variable, *flag.deprecated):
                text = os.environ.get(variable)
                if text is not None:
                    try:
                        value = flag.from_text(text)
                    except argparse.ArgumentTypeError as error:
                        raise ConfigError(f"environment variable {variable}: {error}") from None
                    break
        values[flag.dest] = value
    return values


@dataclass(frozen=True)
class DeprecatedVariable:
    """An old variable name found in the environment."""

    variable: str
    replaced_by: str
    ignored: bool  # the new variable is set too, and wins

    @property
    def message(self) -> str:
        """One line: what the old name is, which name to use, and which value counts."""
        if self.ignored:
            return (
                f"{self.variable} is deprecated and ignored: {self.replaced_by} is set too and wins; "
                f"unset {self.variable}"
            )
        return f"{self.variable} is deprecated: rename it {self.replaced_by} (the old name still works for now)"


def deprecated_variables(args: argparse.Namespace) -> list[DeprecatedVariable]:
    """The deprecated variables set in the environment, of the flags this command's parser has."""
    found = []
    for flag in FLAGS:
        if hasattr(args, flag.dest):
            for old in flag.deprecated:
                if old in os.environ:
                    found.append(DeprecatedVariable(old, flag.variable, ignored=flag.variable in os.environ))
    return found
