"""What a flag is: its name, group and help, its default and converter, and the one rule that names its environment
variable (:func:`variable_of`: ``--web.tls-cert-file`` -> ``SCHEDWATCH_WEB_TLS_CERT_FILE``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from agent.config.values import boolean, choice

# The groups of flags, by what reads them; each subcommand takes the groups it uses (agent/commands/agent_flags.py).
COLLECTION = "collection"  # what is counted and how: run, check and diagnose load the collectors with these
RUNTIME = "runtime"  # the container runtimes asked for names: run, check, diagnose
EXPORT = "export"  # per-process series, how long removed series stay, BPF run-time accounting: what /metrics carries
SERVING = "serving"  # where and how /metrics is served: run (check validates them)
LOGGING = "logging"
CLIENT = "client"  # how diagnose --from reaches an agent or a Prometheus behind TLS and basic auth
GROUPS = (COLLECTION, RUNTIME, EXPORT, SERVING, LOGGING, CLIENT)
AGENT_GROUPS = (COLLECTION, RUNTIME, EXPORT, SERVING, LOGGING)  # `schedwatch run`'s (and check's)

PREFIX = "SCHEDWATCH_"


def variable_of(flag_name: str) -> str:
    """The environment variable of a flag: SCHEDWATCH_ + its name without the leading dashes, upper-cased, with
    '.' and '-' as '_' (--web.tls-cert-file -> SCHEDWATCH_WEB_TLS_CERT_FILE). The one rule for every flag."""
    return PREFIX + flag_name.removeprefix("--").upper().replace(".", "_").replace("-", "_")


def dest_of(flag_name: str) -> str:
    """The attribute a flag is parsed into: its name without the leading dashes, '.' and '-' as '_'."""
    return flag_name.removeprefix("--").replace(".", "_").replace("-", "_")


class _NotGiven:
    """The parsed value of a flag that was not on the command line (its variable or default is taken later)."""

    def __repr__(self) -> str:
        return "(not given)"


NOT_GIVEN: object = _NotGiven()


@dataclass(frozen=True)
class Flag:
    """One flag, declared once: its environment variable follows from its name (:func:`variable_of`)."""

    name: str  # "--web.tls-cert-file"
    group: str
    help: str
    default: object = None  # the value when neither the flag nor its variable is given
    convert: Callable[[str], object] = str  # text of the flag or of its variable -> value; raises ArgumentTypeError
    switch: bool = False  # --NAME / --no-NAME; the variable takes 1/0, true/false, yes/no, on/off
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    shown_default: str | None = None  # how --help and docs/configuration.md show the default
    deprecated: tuple[str, ...] = ()  # older variable names, still read, with a warning at start
    common: bool = False  # among the few `schedwatch run --help` shows; the others are in --help-all

    @property
    def variable(self) -> str:
        """SCHEDWATCH_<NAME>."""
        return variable_of(self.name)

    @property
    def dest(self) -> str:
        """Where argparse puts the value."""
        return dest_of(self.name)

    @property
    def default_text(self) -> str:
        """The default as --help and the documentation show it."""
        if self.shown_default is not None:
            return self.shown_default
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        if self.default is None or self.default == "":
            return "none"
        return str(self.default)

    def from_text(self, text: str) -> object:
        """The value of *text* given in the flag's variable; raises ArgumentTypeError."""
        if self.switch:
            return boolean(text)
        if self.choices:
            return choice(self.choices)(text)
        return self.convert(text)

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        """Add the flag; its value stays NOT_GIVEN when it is not on the command line (see
        :func:`agent.config.resolve.resolve`)."""
        keywords: dict[str, Any] = {
            "dest": self.dest,
            "default": NOT_GIVEN,
            "help": f"{self.help} (default {self.default_text}; env {self.variable})".replace("%", "%%"),
        }
        if self.switch:
            keywords["action"] = argparse.BooleanOptionalAction
        elif self.choices:
            keywords["choices"] = self.choices
        else:
            keywords["type"] = self.convert
            keywords["metavar"] = self.metavar
        parser.add_argument(self.name, **keywords)


# Collectors `run` leaves off unless asked, and why: what leaving them on costs (docs/benchmarks.md, "System calls by
# family"). A one-off measurement (`diagnose`) turns them on by default: see flags_of().
OFF_BY_DEFAULT: dict[str, str] = {
    "syscall_families": (
        "BPF programs on every system call of the node: about 160 ns a call by the kernel's accounting, 330 ns a "
        "call of a timed workload (docs/benchmarks.md)"
    ),
}


def collector_flag(name: str, on_by_default: Collection[str] = ()) -> Flag:
    """--collector.NAME / --no-collector.NAME for one registered collector: on by default unless it is one of
    OFF_BY_DEFAULT and not in *on_by_default*."""
    price = OFF_BY_DEFAULT.get(name)
    if price is None:
        return Flag(f"--collector.{name}", COLLECTION, f"turn the {name} collector on or off", True, switch=True)
    on = name in on_by_default
    help_text = f"turn the {name} collector on or off; {'on' if on else 'off'} by default here: {price}"
    return Flag(f"--collector.{name}", COLLECTION, help_text, on, switch=True)
