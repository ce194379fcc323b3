"""The helps a newcomer reads first: `schedwatch --help` lists every command with what it is for; each command's
--help shows its own flags, grouped, and its examples within the first screen (40 lines at 80 columns), the agent's
flags only in --help-all; JSON is `--json` everywhere; every example parses and every path a help names exists.
Built from the command registry, so a new command is held to the same."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from agent import cli, config
from agent.collectors import registry as collectors
from agent.commands import Command, registry
from agent.commands.parser import CommandParser
from tests.support.agent import REPO

COMMANDS = registry()
SCREEN = 40  # lines
HELPS = ("--help", "--help-all")
AGENT_FLAGS = {flag.name for flag in config.flags_of(config.GROUPS, list(collectors()))}
PATH = re.compile(r"(?<![\w/.-])((?:docs|scripts|deploy|bpf|tests)/[\w./-]*[\w/])")


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """What `schedwatch ARGV` prints (a help: exit 0) on an 80-column terminal."""
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def parser_of(command: Command) -> CommandParser:
    """The command's parser, built as agent.cli builds it."""
    parser = CommandParser(prog=f"schedwatch {command.name}", examples=command.examples)
    command.add_arguments(parser)
    return parser


def own_options(parser: CommandParser) -> list[str]:
    """The option strings of the command's own flags (not -h, --help-all, nor the agent's)."""
    found = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        found.extend(o for o in action.option_strings if o not in AGENT_FLAGS and o != "--help-all")
    return [o for o in found if o.removeprefix("--no-").removeprefix("--") not in {f[2:] for f in AGENT_FLAGS}]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_each_help_shows_its_own_flags_and_examples_on_the_first_screen(
    command: Command, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = help_of([command.name, "--help"], capsys, monkeypatch).splitlines()
    screen = "\n".join(lines[:SCREEN])
    for option in own_options(parser_of(command)):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w.-])", screen), f"{option} not in the first screen"
    assert 2 <= len(command.examples) <= 3, "two or three examples"
    assert "examples:" in screen
    for example in command.examples:
        assert example.line in screen and example.does in screen, example


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_the_agents_flags_are_only_in_help_all_after_the_commands_own(
    command: Command, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    short = help_of([command.name, "--help"], capsys, monkeypatch)
    full = help_of([command.name, "--help-all"], capsys, monkeypatch)
    common = {flag.name for flag in config.FLAGS if flag.common} if command.name == "run" else set()
    hidden = {"--runtime.docker-sockets", "--web.max-connections", "--web.tls-cert-file", "--from.tls-ca-file"}
    assert not {name for name in hidden - common if re.search(rf"{re.escape(name)}\b", short)}
    body = full.split("\n\n", 1)[1]  # after the usage
    agent = [body.index(name) for name in AGENT_FLAGS - common if name in body]
    own = [body.index(option) for option in own_options(parser_of(command)) if option in body]
    if agent and own:
        assert max(own) < min(agent), "the command's own flags come before the agent's"


def test_schedwatch_help_lists_every_command_with_what_it_is_for(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = help_of(["--help"], capsys, monkeypatch)
    for command in COMMANDS:
        assert re.search(rf"^  {command.name} +{re.escape(command.help)}$", text, re.M), command.name
        assert len(f"  {command.name}  {command.help}") <= 80, f"{command.name}'s line is wider than 80 columns"
    assert "module" not in text and "parser" not in text  # no developer's docstring
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_every_example_parses(command: Command) -> None:
    for example in command.examples:
        argv = shlex.split(example.line.split("|")[0])
        argv = argv[argv.index("schedwatch") + 1 :] if "schedwatch" in argv else None  # `make run ARGS=...`
        if argv is None:
            continue
        assert argv[0] == command.name, example.line
        parser_of(command).parse_args(argv[1:])


def test_json_is_spelled_json_everywhere(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command that prints JSON takes --json; check's older --format json still works, out of its help."""
    printing = {"analyze", "compare", "diagnose", "profile", "verify", "check"}
    for command in COMMANDS:
        text = help_of([command.name, "--help"], capsys, monkeypatch)
        assert ("--json" in text) == (command.name in printing), command.name
        assert "--format" not in text, command.name
    (check,) = [command for command in COMMANDS if command.name == "check"]
    parser = parser_of(check)
    assert parser.parse_args(["--json"]).format == "json"
    assert parser.parse_args(["--format", "json"]).format == "json"
    assert parser.parse_args([]).format == "text"
    said = [path for path in (REPO / "agent").rglob("*.py") if "check --format" in path.read_text(encoding="utf-8")]
    assert not said, f"messages that tell users `check --format json`, not `check --json`: {said}"


def test_every_path_a_help_names_exists(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [help_of(["--help"], capsys, monkeypatch)]
    texts += [help_of([command.name, way], capsys, monkeypatch) for command in COMMANDS for way in HELPS]
    named = {path for text in texts for path in PATH.findall(text.replace("\n", " "))}
    assert "docs/profile.md" in named and "docs/configuration.md" in named, named  # the test reads what it should
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert not missing, f"helps name paths that do not exist: {missing}"
