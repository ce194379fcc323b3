"""Flags and SCHEDWATCH_* variables: defaults, validation, one-line errors."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from agent import config
from agent.cli import main
from tests.support.agent import REPO


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "nowhere"], "argument --listen: 'nowhere' is not HOST:PORT, e.g. 127.0.0.1:17953"),
        (["--listen", "127.0.0.1:99999"], "is not HOST:PORT"),
        (["--max-cgroups", "0"], "argument --max-cgroups: '0' must be at least 1"),
        (["--max-threads", "many"], "argument --max-threads: 'many' is not a whole number >= 0"),
        (["--series-grace", "-1"], "argument --series-grace: '-1' is not a number of seconds >= 0"),
    ],
)
def test_bad_flags_get_one_clear_line(args: list[str], message: str) -> None:
    result = run_cli("run", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("schedwatch run: error:")


def test_environment_supplies_defaults_and_is_validated_too() -> None:
    result = run_cli("run", env={"SCHEDWATCH_MAX_CGROUPS": "lots", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert "argument --max-cgroups: 'lots' is not a whole number >= 0" in result.stderr


def test_settings_from_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from agent import config

    monkeypatch.setenv("SCHEDWATCH_PROCESS_TOP_K", "0")
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, ["syscalls"])
    settings = config.from_args(parser.parse_args(["--listen", "[::1]:9", "--no-collector.syscalls"]), ["syscalls"])
    assert (settings.listen_host, settings.listen_port) == ("::1", 9)
    assert settings.collectors == frozenset()
    assert settings.process_top_k == 0
    assert settings.max_processes == 0, "no per-process export means no per-process accounting in the kernel"


def test_version() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0


def test_comma_separated_flags_are_stripped_and_may_be_empty() -> None:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, ["syscalls"])
    args = parser.parse_args(["--runtime.cri-sockets", " /a.sock , ,/b.sock ", "--runtime.docker-sockets", ""])
    settings = config.from_args(args, ["syscalls"])
    assert settings.cri_sockets == (Path("/a.sock"), Path("/b.sock"))
    assert settings.docker_sockets == ()
