"""The flags of the commands that load the agent's collectors (run, check, diagnose), and the settings from them."""

from __future__ import annotations

import argparse

from agent import config, log
from agent.collectors import registry


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """Every agent flag (each with its SCHEDWATCH_* variable), one --collector.NAME per registered collector."""
    config.add_arguments(parser, list(registry()))


def settings_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> config.Settings:
    """The validated settings, logging configured from them; a bad value exits with the parser's one-line error."""
    try:
        settings = config.from_args(args, list(registry()))
    except config.ConfigError as error:
        parser.error(str(error))
    log.configure(settings.log_level, settings.log_format)
    return settings
