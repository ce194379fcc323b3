"""Each subcommand takes only the configuration flags it reads (agent/commands/agent_flags.py): read back from each
command's --help and compared with the groups it reads; a flag it would ignore is a one-line error; what it takes
changes what it does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent import cli, config
from agent.collectors import registry
from agent.commands import agent_flags
from agent.commands import registry as registry_of_commands
from agent.commands.parser import CommandParser
from tests.support.agent import REPO, free_port

COLLECTORS = list(registry())
EVERY_FLAG = config.flags_of(config.GROUPS, COLLECTORS)
SWITCHES = {flag.name.replace("--", "--no-", 1): flag for flag in EVERY_FLAG if flag.switch}
BY_NAME = {flag.name: flag for flag in EVERY_FLAG} | SWITCHES


def names_of(groups: tuple[str, ...]) -> set[str]:
    flags = config.flags_of(groups, COLLECTORS)
    return {flag.name for flag in flags} | {name for name, flag in SWITCHES.items() if flag in flags}


# What each command reads, and why (docs/configuration.md says the same).
READS = {
    "run": names_of(config.AGENT_GROUPS),  # all of them
    "check": names_of(config.AGENT_GROUPS),  # checks them as run would; the web line reports the serving flags
    # loads the collectors (collection, runtime, logging); reaches --from with the client's
    "diagnose": names_of((config.COLLECTION, config.RUNTIME, config.LOGGING, config.CLIENT)),
    "top": names_of((config.COLLECTION, config.RUNTIME, config.LOGGING, config.CLIENT)),  # as diagnose
    "profile": names_of((config.COLLECTION, config.RUNTIME, config.LOGGING)),  # loads them; no --from
    "verify": {"--state-dir", "--mode"},  # its kernel headers, and where its runs' counts come from
    "analyze": set(),  # saved files only
    "compare": set(),
}


def test_every_registered_command_says_what_it_reads() -> None:
    assert set(READS) == {command.name for command in registry_of_commands()}


def usage_options(command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The options `schedwatch COMMAND --help-all` lists in its usage line."""
    monkeypatch.setenv("COLUMNS", "10000")  # one usage line, no option split across lines
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--help-all"])
    assert exited.value.code == 0
    usage = capsys.readouterr().out.split("\n\n")[0]
    return set(re.findall(r"(?<![\w-])--[a-z][\w.-]*", usage))


@pytest.mark.parametrize("command", sorted(READS))
def test_each_command_offers_exactly_the_flags_it_reads(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    offered = usage_options(command, capsys, monkeypatch)
    assert offered & set(BY_NAME) == READS[command]


def error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line a usage error prints (exit status 2)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(list(argv))
    assert exited.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def with_value(flag: config.Flag) -> list[str]:
    if flag.switch:
        return [flag.name]
    return [flag.name, flag.choices[0] if flag.choices else "1"]


def test_diagnose_listen_is_an_error_saying_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert error_line(capsys, "diagnose", "--listen", "0.0.0.0:17953") == (
        "schedwatch diagnose: error: --listen would do nothing here: diagnose serves nothing; it is `schedwatch "
        "run`'s flag"
    )


@pytest.mark.parametrize(
    "name", sorted(names_of(config.AGENT_GROUPS) - READS["diagnose"]), ids=lambda name: name.removeprefix("--")
)
def test_every_run_flag_diagnose_would_ignore_is_an_error(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    flag = BY_NAME[name]
    argv = [name] if flag.switch else [name, "1"]
    assert error_line(capsys, "diagnose", *argv).startswith(
        f"schedwatch diagnose: error: {name} would do nothing here: "
    )


@pytest.mark.parametrize("command", ["analyze", "compare"])
def test_analyze_and_compare_take_no_agent_flag(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = error_line(capsys, command, "--mode", "perf", "a.txt", "b.txt")
    assert line == "schedwatch: error: unrecognized arguments: --mode"


LOADING = [
    flag for flag in config.flags_of((config.COLLECTION, config.RUNTIME), COLLECTORS) if flag.name != "--cgroup-root"
]


@pytest.mark.parametrize("flag", LOADING, ids=lambda flag: flag.name.removeprefix("--"))
def test_collection_flags_beside_from_are_an_error(flag: config.Flag, capsys: pytest.CaptureFixture[str]) -> None:
    line = error_line(capsys, "diagnose", "--from", "http://127.0.0.1:1", *with_value(flag))
    assert line == (
        f"schedwatch diagnose: error: {flag.name} would do nothing with --from (the agent measured with its own "
        "flags): to measure in this process instead, drop --from, or leave it out"
    )


def test_cgroup_root_stays_for_an_agent_but_not_for_a_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert cli.main(["diagnose", "--from", url, "--cgroup-root", "/sys/fs/cgroup", "--duration", "1"]) == 2
    assert capsys.readouterr().err.startswith(f"schedwatch diagnose: cannot reach {url}/metrics")
    line = error_line(capsys, "diagnose", "--from", f"prometheus+{url}", "--cgroup-root", "/sys/fs/cgroup")
    assert line.startswith("schedwatch diagnose: error: --cgroup-root would do nothing with --from")


def test_client_flags_need_from_and_tls_flags_need_https(capsys: pytest.CaptureFixture[str]) -> None:
    assert error_line(capsys, "diagnose", "--from.basic-auth-user", "u", "--from.tls-ca-file", "ca.pem") == (
        "schedwatch diagnose: error: --from.tls-ca-file, --from.basic-auth-user would do nothing without --from: "
        "add --from https://HOST:PORT, or leave them out"
    )
    assert error_line(capsys, "diagnose", "--from", "prometheus+http://p:9090", "--from.tls-ca-file", "ca.pem") == (
        "schedwatch diagnose: error: --from.tls-ca-file would do nothing with an http:// --from: use https://, "
        "or leave it out"
    )
    assert error_line(capsys, "diagnose", "--from", "http://a:1", "--from.basic-auth-user", "u") == (
        "schedwatch diagnose: error: --from.basic-auth-user and --from.basic-auth-password-file go together: give "
        "both or neither"
    )


def test_client_variables_serve_only_an_https_from(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod's environment may set them for every command: an http:// --from does not read the TLS ones."""
    monkeypatch.setenv("SCHEDWATCH_FROM_TLS_CA_FILE", "/nonexistent/ca.pem")
    port = free_port()
    assert cli.main(["diagnose", "--from", f"http://127.0.0.1:{port}", "--duration", "1"]) == 2
    assert capsys.readouterr().err.startswith("schedwatch diagnose: cannot reach")
    assert error_line(capsys, "diagnose", "--from", f"https://127.0.0.1:{port}", "--duration", "1") == (
        "schedwatch diagnose: error: --from.tls-ca-file /nonexistent/ca.pem: cannot read it (No such file or directory)"
    )


def run_check(*flags: str) -> tuple[int, dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "check", "--no-load", "--format", "json", *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SCHEDWATCH_LOG_LEVEL": "error"},
    )
    return result.returncode, json.loads(result.stdout)


def test_check_reports_the_serving_flags_as_run_would_use_them(tmp_path: Path) -> None:
    from tests.support.tls import issue, make_ca

    ca = make_ca(tmp_path / "ca")
    server, other = issue(ca, tmp_path, "server", "IP:127.0.0.1"), issue(ca, tmp_path, "other", "IP:127.0.0.1")
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    serving = ["--listen", "[::1]:9100", "--web.max-connections", "7", "--web.timeout", "3"]
    auth = ["--web.basic-auth-user", "prometheus", "--web.basic-auth-password-file", str(password)]
    _status, report = run_check(
        *serving, *auth, "--web.tls-cert-file", str(server.cert), "--web.tls-key-file", str(server.key)
    )
    assert report["web"] == {
        "listen": "[::1]:9100",
        "tls": True,
        "basic_auth_user": "prometheus",
        "max_connections": 7,
        "timeout_seconds": 3.0,
        "problem": "",
    }
    status, report = run_check("--web.tls-cert-file", str(server.cert), "--web.tls-key-file", str(other.key))
    web = report["web"]
    assert isinstance(web, dict)
    assert web["problem"] == (
        "the TLS certificate and key do not load (KEY_VALUES_MISMATCH): give a PEM certificate in "
        "--web.tls-cert-file and its key in --web.tls-key-file"
    )
    assert status == 1 and report["ok"] is False


def test_verify_reads_the_state_dir_and_mode_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = CommandParser(prog="schedwatch verify")
    agent_flags.add_verify_arguments(parser)
    assert agent_flags.verify_settings_from(parser.parse_args([]), parser) == (Path("/run/schedwatch"), "auto")
    monkeypatch.setenv("SCHEDWATCH_STATE_DIR", "/var/lib/schedwatch")
    monkeypatch.setenv("SCHEDWATCH_MODE", "perf")
    assert agent_flags.verify_settings_from(parser.parse_args([]), parser) == (Path("/var/lib/schedwatch"), "perf")
    given = parser.parse_args(["--state-dir", "/x", "--mode", "procfs"])
    assert agent_flags.verify_settings_from(given, parser) == (Path("/x"), "procfs")
