"""The agent's flags each subcommand takes, by group (agent.config), and the settings from them; one place adds them
all to a command's parser, each group under its heading, listed by the command's --help-all
(agent/commands/parser.py).

Each command takes only the groups it reads: `run` and `check` every group of the agent's (`check` validates the
serving flags as `run` would); `diagnose`, `top` and `profile` the collection, runtime and logging flags (they load
the collectors themselves), and `diagnose` and `top` the client flags of ``--from``; `verify` only --state-dir and
--mode; `analyze` and `compare` none. `run --help` shows the flags the table marks common (:attr:`Flag.common`).
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from agent import config, log
from agent.collectors import registry
from agent.commands.parser import CommandParser

GROUP_TITLES = {
    config.COLLECTION: "collection: what is counted and how",
    config.RUNTIME: "runtime: the container runtimes asked for names",
    config.EXPORT: "export: what /metrics carries",
    config.SERVING: "serving: where and how /metrics is served",
    config.LOGGING: "logging",
    config.CLIENT: "client: how --from reaches a server behind TLS or basic auth",
}


def add_flags(
    parser: CommandParser, groups: Sequence[str], common_shown: bool = False, on_by_default: Collection[str] = ()
) -> None:
    """Add the flags of *groups* (the collection group with one --collector.NAME per registered collector, those of
    config.OFF_BY_DEFAULT on by default only when in *on_by_default*), each group under its heading in --help-all;
    with *common_shown*, the flags the table marks common in a group --help shows too."""
    flags = config.flags_of(groups, list(registry()), on_by_default)
    shown = [flag for flag in flags if flag.common] if common_shown else []
    if shown:
        section = parser.add_argument_group(
            "the agent's most used flags",
            "--collector.NAME / --no-collector.NAME turn one collector on or off (each is in --help-all)",
        )
        for flag in shown:
            flag.add_to(section)
    for group in config.GROUPS:
        if group in groups:
            section = parser.agent_group(GROUP_TITLES[group])
            for flag in flags:
                if flag.group == group and flag not in shown:
                    flag.add_to(section)


def add_agent_arguments(parser: CommandParser, common_shown: bool = False) -> None:
    """`schedwatch run`'s flags: collection, runtime, export, serving and logging."""
    add_flags(parser, config.AGENT_GROUPS, common_shown)


def add_collection_arguments(parser: CommandParser, on_by_default: Collection[str] = ()) -> None:
    """What is counted and how (one --collector.NAME per registered collector, --mode, --cgroup-root, map sizes,
    ...) and the runtimes asked for names: the flags of a command that loads the collectors (*on_by_default*: those
    of config.OFF_BY_DEFAULT this command turns on unless asked not to)."""
    add_flags(parser, (config.COLLECTION, config.RUNTIME), on_by_default=on_by_default)


def add_logging_arguments(parser: CommandParser) -> None:
    """--log-level and --log-format."""
    add_flags(parser, (config.LOGGING,))


def add_client_arguments(parser: CommandParser) -> None:
    """How diagnose --from reaches a server behind TLS (CA, client certificate, server name) and basic auth."""
    add_flags(parser, (config.CLIENT,))


VERIFY_FLAGS = ("--state-dir", "--mode")  # where kernel headers are kept, and where counts come from


def add_verify_arguments(parser: CommandParser) -> None:
    """--state-dir and --mode alone (verify loads the collectors of a mode for its runs), with their variables."""
    section = parser.agent_group(GROUP_TITLES[config.COLLECTION])
    for flag in _verify_flags():
        flag.add_to(section)


def verify_settings_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[Path, str]:
    """(--state-dir, --mode), each else its variable, else its default; a bad variable is the one-line error."""
    try:
        values = config.resolve(args, _verify_flags())
    except config.ConfigError as error:
        parser.error(str(error))
    return values["state_dir"], values["mode"]


def _verify_flags() -> list[config.Flag]:
    return [flag for flag in config.FLAGS if flag.name in VERIFY_FLAGS]


def settings_from(
    args: argparse.Namespace, parser: argparse.ArgumentParser, on_by_default: Collection[str] = ()
) -> config.Settings:
    """The validated settings, logging configured from them, then one warning per deprecated variable set; a bad
    value exits with the parser's one-line error. *on_by_default*: as for add_collection_arguments."""
    try:
        settings = config.from_args(args, list(registry()), on_by_default)
    except config.ConfigError as error:
        parser.error(str(error))
    log.configure(settings.log_level, settings.log_format)
    logger = log.get_logger("config")
    for old in config.deprecated_variables(args):
        logger.warning("deprecated_variable", variable=old.variable, use=old.replaced_by, message=old.message)
    return settings


def client_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> config.ClientSettings:
    """The validated client settings of --from; a bad value exits with the parser's one-line error."""
    try:
        return config.client_from_args(args)
    except config.ConfigError as error:
        parser.error(str(error))


def refuse_given(
    args: argparse.Namespace, parser: argparse.ArgumentParser, flags: list[config.Flag], when: str, fix: str
) -> None:
    """Exit with a one-line error naming those of *flags* on the command line: they would do nothing *when*; *fix*
    says what to do instead of leaving them out. Their variables are not refused: the environment serves every
    command."""
    named = [flag.name for flag in config.given(args, flags)]
    if named:
        it = "it" if len(named) == 1 else "them"
        parser.error(f"{', '.join(named)} would do nothing {when}: {fix}, or leave {it} out")


class _Refused(argparse.Action):
    """A flag another command takes: given here, it is a one-line error saying why it would do nothing."""

    def __init__(self, option_strings: list[str], dest: str, why: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.why = why

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.error(f"{option_string} would do nothing here: {self.why}")


def refuse_groups(parser: argparse.ArgumentParser, groups: tuple[str, ...], why: str) -> None:
    """Make the flags of *groups* one-line errors saying *why* (not in --help, not accepted): `run`'s flags a user
    may carry over to a command that would ignore them."""
    for flag in config.flags_of(groups):
        names = [flag.name, flag.name.replace("--", "--no-", 1)] if flag.switch else [flag.name]
        parser.add_argument(
            *names,
            action=_Refused,
            nargs=0 if flag.switch else None,
            dest=f"refused_{flag.dest}",
            default=argparse.SUPPRESS,
            why=why,
        )
