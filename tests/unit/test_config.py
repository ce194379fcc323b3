"""Flags and SCHEDWATCH_* variables: defaults, validation, one-line errors."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent import config
from agent.cli import main
from tests.support.agent import REPO

COLLECTORS = ["syscalls", "sched", "cgroup_cpu"]


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
    assert result.stderr == (
        "schedwatch run: error: environment variable SCHEDWATCH_MAX_CGROUPS: 'lots' is not a whole number >= 0\n"
    )


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


def settings(*flags: str) -> config.Settings:
    """Settings from *flags* and the current environment, as `schedwatch run` builds them; ConfigError if bad."""
    parser = config.ArgumentParser(prog="schedwatch run")
    config.add_arguments(parser, COLLECTORS)
    return config.from_args(parser.parse_args(list(flags)), COLLECTORS)


def flag_error(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    """The one line a bad flag gets (and exit code 2)."""
    with pytest.raises(SystemExit) as exit_info:
        settings(*flags)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        *[("1", True), ("true", True), ("YES", True), ("On", True), (" yes ", True)],
        *[("0", False), ("False", False), ("no", False), ("OFF", False)],
    ],
)
def test_booleans_from_the_environment(monkeypatch: pytest.MonkeyPatch, text: str, value: bool) -> None:
    monkeypatch.setenv("SCHEDWATCH_COLLECTOR_SCHED", text)
    monkeypatch.setenv("SCHEDWATCH_BPF_STATS", text)
    monkeypatch.setenv("SCHEDWATCH_SIDECAR", text)
    made = settings()
    assert ("sched" in made.collectors, made.bpf_stats, made.sidecar) == (value, value, value)
    assert {"syscalls", "cgroup_cpu"} <= made.collectors


@pytest.mark.parametrize("variable", ["SCHEDWATCH_COLLECTOR_SCHED", "SCHEDWATCH_BPF_STATS", "SCHEDWATCH_SIDECAR"])
@pytest.mark.parametrize("text", ["enabled", "", "2", "y"])
def test_an_unrecognised_boolean_is_an_error_not_false(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str
) -> None:
    monkeypatch.setenv(variable, text)
    with pytest.raises(config.ConfigError) as error:
        settings()
    assert str(error.value) == (
        f"environment variable {variable}: '{text}' is not a boolean: use 1/0, true/false, yes/no or on/off"
    )


def test_a_flag_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDWATCH_COLLECTOR_SCHED", "enabled")
    monkeypatch.setenv("SCHEDWATCH_MAX_THREADS", "lots")
    made = settings("--no-collector.sched", "--max-threads", "1024")
    assert "sched" not in made.collectors and made.max_threads == 1024


def test_the_issues_collector_switch_through_the_real_cli() -> None:
    """SCHEDWATCH_COLLECTOR_SCHED=enabled used to turn the collector off without a word."""
    result = run_cli("run", env={"SCHEDWATCH_COLLECTOR_SCHED": "enabled", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert result.stderr == (
        "schedwatch run: error: environment variable SCHEDWATCH_COLLECTOR_SCHED: 'enabled' is not a boolean: "
        "use 1/0, true/false, yes/no or on/off\n"
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--max-cgroups", "1000000"],
            "argument --max-cgroups: 1000000 would preallocate about 603 MiB of kernel memory (632 bytes per cgroup "
            "in the syscalls, sched and families maps); give at most 524288 (316 MiB)",
        ),
        (
            ["--max-processes", "2000000"],
            "argument --max-processes: 2000000 would preallocate about 488 MiB of kernel memory (256 bytes per "
            "process in the syscalls and sched maps); give at most 1048576 (256 MiB)",
        ),
        (
            ["--max-threads", "5000000"],
            "argument --max-threads: 5000000 would preallocate about 1,373 MiB of kernel memory (288 bytes per "
            "thread in the sched, syscalls and families maps); give at most 1048576 (288 MiB)",
        ),
        (["--max-threads", "0"], "argument --max-threads: '0' must be at least 1"),
        (["--max-processes", "-5"], "argument --max-processes: '-5' is not a whole number >= 0"),
        (["--process-top-k", "1e3"], "argument --process-top-k: '1e3' is not a whole number >= 0"),
        (["--series-grace", "nan"], "argument --series-grace: 'nan' is not a number of seconds >= 0"),
        (["--series-grace", "inf"], "argument --series-grace: 'inf' is not a number of seconds >= 0"),
        (
            ["--series-grace", "100000"],
            "argument --series-grace: '100000' is more than 86400 seconds, so a removed workload's series would "
            "stay for more than a day: give at most 86400",
        ),
        (["--runtime.timeout", "0"], "argument --runtime.timeout: '0' is not a number of seconds > 0"),
        (
            ["--runtime.timeout", "61"],
            "argument --runtime.timeout: '61' is more than 60 seconds, so a stuck runtime could hold back names "
            "that long: give at most 60",
        ),
        (["--web.max-connections", "0"], "argument --web.max-connections: '0' must be at least 1"),
        (
            ["--web.max-connections", "5000"],
            "argument --web.max-connections: '5000' is too many (each open connection holds a thread and a file "
            "descriptor): give at most 1024",
        ),
        (["--web.timeout", "0"], "argument --web.timeout: '0' is not a number of seconds > 0"),
        (["--web.timeout", "soon"], "argument --web.timeout: 'soon' is not a number of seconds > 0"),
        (
            ["--web.timeout", "301"],
            "argument --web.timeout: '301' is more than 300 seconds, so a stalled client could hold a connection "
            "that long: give at most 300",
        ),
    ],
)
def test_every_bound_is_checked_with_one_line_saying_what_to_do(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert flag_error(capsys, *flags) == f"schedwatch run: error: {message}"


def test_the_largest_bounds_are_accepted() -> None:
    made = settings(
        *("--max-cgroups", "524288", "--max-processes", "1048576", "--max-threads", "1048576"),
        *("--process-top-k", "1048576", "--series-grace", "86400", "--runtime.timeout", "60"),
        *("--web.max-connections", "1024", "--web.timeout", "300"),
    )
    assert (made.max_cgroups, made.max_processes, made.max_threads, made.process_top_k) == (
        524288,
        1048576,
        1048576,
        1048576,
    )
    assert (made.series_grace_seconds, made.runtime_timeout, made.web_max_connections, made.web_timeout) == (
        86400,
        60,
        1024,
        300,
    )


def test_web_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    made = settings()
    assert (made.web_max_connections, made.web_timeout) == (64, 10.0)
    monkeypatch.setenv("SCHEDWATCH_WEB_MAX_CONNECTIONS", "8")
    monkeypatch.setenv("SCHEDWATCH_WEB_TIMEOUT", "2.5")
    made = settings()
    assert (made.web_max_connections, made.web_timeout) == (8, 2.5)


def test_process_top_k_cannot_exceed_the_processes_the_kernel_keeps() -> None:
    assert settings("--process-top-k", "16384").process_top_k == 16384
    with pytest.raises(config.ConfigError) as error:
        settings("--process-top-k", "100", "--max-processes", "50")
    assert str(error.value) == (
        "--process-top-k 100 is more than --max-processes 50, the processes the kernel keeps: "
        "raise --max-processes or lower --process-top-k"
    )


@pytest.mark.parametrize(
    ("variable", "text", "message"),
    [
        ("SCHEDWATCH_MAX_THREADS", "9999999999", "would preallocate about"),
        ("SCHEDWATCH_PROCESS_TOP_K", "-1", "'-1' is not a whole number >= 0"),
        ("SCHEDWATCH_SERIES_GRACE", "forever", "'forever' is not a number of seconds >= 0"),
        ("SCHEDWATCH_RUNTIME_TIMEOUT", "0", "'0' is not a number of seconds > 0"),
        ("SCHEDWATCH_WEB_MAX_CONNECTIONS", "0", "'0' must be at least 1"),
        ("SCHEDWATCH_WEB_TIMEOUT", "-3", "'-3' is not a number of seconds > 0"),
        ("SCHEDWATCH_LISTEN", "nowhere", "'nowhere' is not HOST:PORT"),
        ("SCHEDWATCH_WORKLOADS_BY", "pod", "'pod' is not one of auto, cgroup, process"),
        ("SCHEDWATCH_LOG_LEVEL", "verbose", "'verbose' is not one of debug, info, warning, error"),
    ],
)
def test_a_bad_environment_value_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str, message: str
) -> None:
    monkeypatch.setenv(variable, text)
    with pytest.raises(config.ConfigError) as error:
        settings()
    assert str(error.value).startswith(f"environment variable {variable}: ")
    assert message in str(error.value)


def test_check_names_a_bad_variable_too() -> None:
    result = run_cli("check", "--no-load", env={**os.environ, "SCHEDWATCH_WEB_TIMEOUT": "-1"})
    assert result.returncode == 2
    assert result.stderr == (
        "schedwatch check: error: environment variable SCHEDWATCH_WEB_TIMEOUT: '-1' is not a number of seconds > 0\n"
    )


def _map_costs_from_the_bpf_sources() -> dict[str, int]:
    """Kernel bytes per unit of each MAX_* bound, from the BPF_HASH declarations and structs in bpf/*.bpf.c:
    a 48-byte element header, key and value rounded up to 8 bytes, and a 16-byte bucket (one per entry)."""
    sizes = {"u64": 8, "u32": 4, "u8": 1}
    costs: dict[str, int] = {}
    for source in sorted((REPO / "bpf").glob("*.bpf.c")):
        text = source.read_text()
        constants = {name: int(number) for name, number in re.findall(r"#define (\w+) (\d+)\b", text)}
        constants |= {name: int(number) for name, number in re.findall(r"\b([A-Z_]+) = (\d+)", text)}
        structs = {
            name: sum(
                sizes[kind] * (constants[count] if count else 1)
                for kind, count in re.findall(r"\b(u64|u32) \w+(?:\[(\w+)\])?;", body)
            )
            for name, body in re.findall(r"struct (\w+) \{(.*?)\};", text, re.S)
        }
        for key, value, bound in re.findall(r"BPF_HASH\(\w+, (\w+), (struct \w+|\w+), (MAX_\w+)\)", text):
            value_size = structs[value.split()[1]] if value.startswith("struct ") else sizes[value]
            entry = 48 + -(-sizes[key] // 8) * 8 + -(-value_size // 8) * 8 + 16
            costs[bound] = costs.get(bound, 0) + entry
    return costs


def test_the_kernel_memory_in_the_messages_follows_the_bpf_maps() -> None:
    assert _map_costs_from_the_bpf_sources() == {
        "MAX_CGROUPS": config.BYTES_PER_CGROUP,
        "MAX_PROCESSES": config.BYTES_PER_PROCESS,
        "MAX_THREADS": config.BYTES_PER_THREAD,
        "MAX_TIMED": config.BYTES_PER_TIMED_WORKLOAD,
    }
