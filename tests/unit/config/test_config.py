"""Flags and SCHEDWATCH_* variables: defaults, validation, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent import config
from agent.cli import main
from agent.commands import agent_flags, registry
from agent.commands.parser import CommandParser
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

    from agent import config

    monkeypatch.setenv("SCHEDWATCH_PROCESS_TOP_K", "0")
    parser = CommandParser()
    agent_flags.add_agent_arguments(parser)
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
    parser = CommandParser()
    agent_flags.add_agent_arguments(parser)
    args = parser.parse_args(["--runtime.cri-sockets", " /a.sock , ,/b.sock ", "--runtime.docker-sockets", ""])
    settings = config.from_args(args, ["syscalls"])
    assert settings.cri_sockets == (Path("/a.sock"), Path("/b.sock"))
    assert settings.docker_sockets == ()


def settings(*flags: str) -> config.Settings:
    """Settings from *flags* and the current environment, as `schedwatch run` builds them; ConfigError if bad."""
    parser = CommandParser(prog="schedwatch run")
    agent_flags.add_agent_arguments(parser)
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
            "argument --max-cgroups: 1000000 would preallocate about 854 MiB of kernel memory (896 bytes per cgroup "
            "in the syscalls, sched and families maps); give at most 524288 (448 MiB)",
        ),
        (
            ["--max-processes", "2000000"],
            "argument --max-processes: 2000000 would preallocate about 565 MiB of kernel memory (296 bytes per "
            "process in the syscalls and sched maps); give at most 1048576 (296 MiB)",
        ),
        (
            ["--max-threads", "5000000"],
            "argument --max-threads: 5000000 would preallocate about 1,602 MiB of kernel memory (336 bytes per "
            "thread in the sched, syscalls and families maps); give at most 1048576 (336 MiB)",
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
    """Kernel bytes per unit of each MAX_* bound, from the BPF_HASH (and LRU hash) declarations and structs in
    bpf/*.bpf.c: a 48-byte element header, key and value rounded up to 8 bytes, and a 16-byte bucket (one per entry);
    and from the BPF_ARRAY ones: the value rounded up to 8 bytes."""
    sizes = {"u64": 8, "u32": 4, "u8": 1}
    costs: dict[str, int] = {}
    for source in sorted((REPO / "bpf").glob("*.bpf.c")):
        text = source.read_text()
        constants = {name: int(number) for name, number in re.findall(r"#define (\w+) (\d+)\b", text)}
        constants |= {name: int(number) for name, number in re.findall(r"\b([A-Z_]+) = (\d+)", text)}
        structs: dict[str, int] = {}
        for name, body in re.findall(r"struct (\w+) \{(.*?)\};", text, re.S):
            structs[name] = sum(
                sizes[kind] * (constants[count] if count else 1)
                for kind, count in re.findall(r"\b(u64|u32) \w+(?:\[(\w+)\])?;", body)
            ) + sum(structs[nested] for nested in re.findall(r"\bstruct (\w+) \w+;", body))
        # A bound may be a multiple of a MAX_* one: "#define NEIGHBOUR_PAIRS (2 * MAX_CGROUPS)".
        multiples = {name: (bound, int(times)) for name, times, bound in re.findall(
            r"#define (\w+) \((\d+) \* (MAX_\w+)\)", text
        )}  # fmt: skip
        hashes = re.findall(r"BPF_HASH\(\w+, (struct \w+|\w+), (struct \w+|\w+), (\w+)\)", text)
        hashes += re.findall(r'BPF_TABLE\("lru_hash", (struct \w+|\w+), (struct \w+|\w+), \w+, (\w+)\)', text)
        for key, value, size in hashes:
            bound, times = multiples.get(size, (size, 1))
            if not bound.startswith("MAX_"):
                continue
            value_size = structs[value.split()[1]] if value.startswith("struct ") else sizes[value]
            key_size = structs[key.split()[1]] if key.startswith("struct ") else sizes[key]
            entry = 48 + -(-key_size // 8) * 8 + -(-value_size // 8) * 8 + 16
            costs[bound] = costs.get(bound, 0) + times * entry
        for value, size in re.findall(r"BPF_ARRAY\(\w+, (struct \w+|\w+), (MAX_\w+)\)", text):
            value_size = structs[value.split()[1]] if value.startswith("struct ") else sizes[value]
            costs[size] = costs.get(size, 0) + -(-value_size // 8) * 8  # an array: the value alone
    return costs


def test_the_kernel_memory_in_the_messages_follows_the_bpf_maps() -> None:
    # The bounds a --max-* flag sets (code attribution's maps, MAX_CALL_SITES, MAX_SITE_WORKLOADS and MAX_SAMPLE_SLOTS,
    # are sized apart).
    costs = _map_costs_from_the_bpf_sources()
    apart = {"MAX_CALL_SITES", "MAX_SITE_WORKLOADS", "MAX_SAMPLE_SLOTS", "MAX_CPUS"}  # last_sites: a slot per CPU
    assert {bound: cost for bound, cost in costs.items() if bound not in apart} == {
        "MAX_CGROUPS": config.BYTES_PER_CGROUP,
        "MAX_PROCESSES": config.BYTES_PER_PROCESS,
        "MAX_THREADS": config.BYTES_PER_THREAD,
        "MAX_TIMED": config.BYTES_PER_TIMED_WORKLOAD,
    }


# One naming scheme: every flag's variable follows from its name, declared once (agent.config.FLAGS).


def the_rule(flag_name: str) -> str:
    """The documented rule, written out here on its own: SCHEDWATCH_ + the name, upper-cased, '.' and '-' as '_'."""
    return "SCHEDWATCH_" + re.sub(r"[.-]", "_", flag_name[2:].upper())


def command_parser(name: str) -> CommandParser:
    """`schedwatch NAME`'s own parser, built as agent.cli builds it."""
    from agent.commands import registry

    (command,) = [command for command in registry() if command.name == name]
    parser = CommandParser(prog=f"schedwatch {name}")
    command.add_arguments(parser)
    return parser


COMMANDS = tuple(command.name for command in registry())
EVERY_FLAG = config.flags_of(config.GROUPS, COLLECTORS)

# A valid text for each flag's variable that is not its default (switches and choices are derived).
SAMPLES = {
    "--cgroup-root": "/host/sys/fs/cgroup",
    "--state-dir": "/var/lib/schedwatch",
    "--max-cgroups": "100",
    "--max-threads": "200",
    "--syscall-timed-workloads": "3",
    "--sample-frequency": "19",
    "--code-workloads": "4",
    "--code-top-k": "5",
    "--runtime.docker-sockets": "/a.sock",
    "--runtime.kubelet-docker-sockets": "/b.sock",
    "--runtime.cri-sockets": "/c.sock",
    "--runtime.containerd-socket": "/d.sock",
    "--runtime.containerd-namespaces": "k8s.io",
    "--runtime.timeout": "2.5",
    "--process-top-k": "5",
    "--max-processes": "300",
    "--series-grace": "30",
    "--listen": "0.0.0.0:9",
    "--web.tls-cert-file": "/tls/tls.crt",
    "--web.tls-key-file": "/tls/tls.key",
    "--web.basic-auth-user": "prometheus",
    "--web.basic-auth-password-file": "/auth/password",
    "--web.max-connections": "8",
    "--web.timeout": "3",
    "--from.tls-ca-file": "/tls/ca.crt",
    "--from.tls-cert-file": "/tls/client.crt",
    "--from.tls-key-file": "/tls/client.key",
    "--from.tls-server-name": "schedwatch",
    "--from.basic-auth-user": "prometheus",
    "--from.basic-auth-password-file": "/auth/password",
}


def sample(flag: config.Flag) -> tuple[str, object]:
    """A text for the flag's variable and the value it must give."""
    if flag.switch:
        return ("0", False) if flag.default else ("1", True)
    if flag.choices:
        return flag.choices[-1], flag.choices[-1]
    text = SAMPLES[flag.name]
    return text, flag.from_text(text)


def test_every_flag_in_every_parser_names_the_variable_the_rule_gives() -> None:
    """Read back from the parsers themselves: each configuration flag's help names SCHEDWATCH_<rule>, and each
    flag of the table is taken by at least one command."""
    declared = {flag.name for flag in EVERY_FLAG if not flag.name.startswith("--collector.")}
    seen: set[str] = set()
    for name in COMMANDS:
        for action in command_parser(name)._actions:
            named = re.search(r"env (SCHEDWATCH_\w+)\)$", action.help or "")
            if named is None:
                continue
            (flag_name, *_negation) = action.option_strings
            assert named.group(1) == the_rule(flag_name), (name, flag_name)
            seen.add(flag_name)
    assert declared <= seen, declared - seen
    assert {flag.variable for flag in EVERY_FLAG} == {the_rule(flag.name) for flag in EVERY_FLAG}


@pytest.mark.parametrize("flag", EVERY_FLAG, ids=lambda flag: flag.name)
def test_each_variable_is_read_by_its_name(monkeypatch: pytest.MonkeyPatch, flag: config.Flag) -> None:
    command = "diagnose" if flag.group == config.CLIENT else "run"
    parser = command_parser(command)
    text, expected = sample(flag)
    assert expected != flag.default, "the sample must differ from the default, or the test proves nothing"
    assert config.resolve(parser.parse_args([]), [flag])[flag.dest] == flag.default
    monkeypatch.setenv(the_rule(flag.name), text)
    assert config.resolve(parser.parse_args([]), [flag])[flag.dest] == expected


def test_the_variables_reach_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, text in {
        "SCHEDWATCH_RUNTIME_DOCKER_SOCKETS": "/a.sock,/b.sock",
        "SCHEDWATCH_RUNTIME_CONTAINERD_SOCKET": "",
        "SCHEDWATCH_WEB_TLS_CERT_FILE": "/tls/tls.crt",
        "SCHEDWATCH_WEB_BASIC_AUTH_USER": "prometheus",
        "SCHEDWATCH_PROCESS_TOP_K": "5",
    }.items():
        monkeypatch.setenv(name, text)
    made = settings()
    assert made.docker_sockets == (Path("/a.sock"), Path("/b.sock"))
    assert made.containerd_socket is None
    assert made.tls_cert_file == Path("/tls/tls.crt") and made.basic_auth_user == "prometheus"
    assert (made.process_top_k, made.max_processes) == (5, 16384)


DEPRECATED = {old: flag for flag in config.FLAGS for old in flag.deprecated}


def test_the_deprecated_names_are_the_old_ones_that_broke_the_rule() -> None:
    assert {old: flag.variable for old, flag in DEPRECATED.items()} == {
        "SCHEDWATCH_DOCKER_SOCKETS": "SCHEDWATCH_RUNTIME_DOCKER_SOCKETS",
        "SCHEDWATCH_KUBELET_DOCKER_SOCKETS": "SCHEDWATCH_RUNTIME_KUBELET_DOCKER_SOCKETS",
        "SCHEDWATCH_CRI_SOCKETS": "SCHEDWATCH_RUNTIME_CRI_SOCKETS",
        "SCHEDWATCH_CONTAINERD_SOCKET": "SCHEDWATCH_RUNTIME_CONTAINERD_SOCKET",
        "SCHEDWATCH_CONTAINERD_NAMESPACES": "SCHEDWATCH_RUNTIME_CONTAINERD_NAMESPACES",
        "SCHEDWATCH_TLS_CERT_FILE": "SCHEDWATCH_WEB_TLS_CERT_FILE",
        "SCHEDWATCH_TLS_KEY_FILE": "SCHEDWATCH_WEB_TLS_KEY_FILE",
        "SCHEDWATCH_BASIC_AUTH_USER": "SCHEDWATCH_WEB_BASIC_AUTH_USER",
        "SCHEDWATCH_BASIC_AUTH_PASSWORD_FILE": "SCHEDWATCH_WEB_BASIC_AUTH_PASSWORD_FILE",
    }


@pytest.mark.parametrize("old", sorted(DEPRECATED))
def test_an_old_name_still_works_and_warns(monkeypatch: pytest.MonkeyPatch, old: str) -> None:
    flag = DEPRECATED[old]
    parser = command_parser("run")
    text, expected = sample(flag)
    monkeypatch.setenv(old, text)
    args = parser.parse_args([])
    assert config.resolve(args, [flag])[flag.dest] == expected
    (warning,) = config.deprecated_variables(args)
    assert warning.message == f"{old} is deprecated: rename it {flag.variable} (the old name still works for now)"
    # Both set: the new name wins, and the warning says the old one is ignored.
    monkeypatch.setenv(flag.variable, "/new" if text.startswith("/") else "new")
    args = parser.parse_args([])
    assert config.resolve(args, [flag])[flag.dest] == flag.from_text(os.environ[flag.variable])
    (warning,) = config.deprecated_variables(args)
    assert warning.message == (f"{old} is deprecated and ignored: {flag.variable} is set too and wins; unset {old}")


def test_the_old_names_work_end_to_end_with_one_warning_each(tmp_path: Path) -> None:
    """`schedwatch check` with every old name set: what each says is in the report, and each is one warning line
    (a JSON log line, written after logging is configured) naming the new variable."""
    from tests.support.tls import issue, make_ca

    server = issue(make_ca(tmp_path), tmp_path, "server", "IP:127.0.0.1")
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    old = {
        "SCHEDWATCH_DOCKER_SOCKETS": str(tmp_path / "docker.sock"),
        "SCHEDWATCH_KUBELET_DOCKER_SOCKETS": str(tmp_path / "kubelet-docker.sock"),
        "SCHEDWATCH_CRI_SOCKETS": str(tmp_path / "cri.sock"),
        "SCHEDWATCH_CONTAINERD_SOCKET": str(tmp_path / "containerd.sock"),
        "SCHEDWATCH_CONTAINERD_NAMESPACES": "k8s.io",
        "SCHEDWATCH_TLS_CERT_FILE": str(server.cert),
        "SCHEDWATCH_TLS_KEY_FILE": str(server.key),
        "SCHEDWATCH_BASIC_AUTH_USER": "prometheus",
        "SCHEDWATCH_BASIC_AUTH_PASSWORD_FILE": str(password),
    }
    environment = {**os.environ, **old, "SCHEDWATCH_RUNTIME_CRI_SOCKETS": str(tmp_path / "new-cri.sock")}
    result = run_cli("check", "--no-load", "--format", "json", "--log-format", "json", env=environment)
    report = json.loads(result.stdout)
    assert set(report["runtimes"]) == {
        str(tmp_path / name) for name in ("docker.sock", "kubelet-docker.sock", "new-cri.sock", "containerd.sock")
    }
    assert report["web"] | {"problem": ""} == {
        "listen": "127.0.0.1:17953",
        "tls": True,
        "basic_auth_user": "prometheus",
        "max_connections": 64,
        "timeout_seconds": 10.0,
        "problem": "",
    }
    assert report["web"]["problem"] == ""
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    warnings = {line["variable"]: line for line in lines if line["event"] == "deprecated_variable"}
    assert set(warnings) == set(old) and len(lines) == len(old)
    for variable, line in warnings.items():
        assert line["level"] == "warning" and line["use"] == DEPRECATED[variable].variable
        assert line["message"].startswith(f"{variable} is deprecated")
        assert DEPRECATED[variable].variable in line["message"]
    assert "is set too and wins" in warnings["SCHEDWATCH_CRI_SOCKETS"]["message"]


def test_an_empty_path_variable_means_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDWATCH_CGROUP_ROOT", "")
    monkeypatch.setenv("SCHEDWATCH_WEB_TLS_CERT_FILE", "")
    made = settings()
    assert made.cgroup_root is None and made.tls_cert_file is None


# docs/configuration.md: the one table of the flags, their variables and defaults, and the deprecated names.

CONFIGURATION_DOC = REPO / "docs" / "configuration.md"


def doc_rows() -> list[list[str]]:
    rows = []
    for line in CONFIGURATION_DOC.read_text().splitlines():
        if line.startswith("| `-") or line.startswith("| `SCHEDWATCH_"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_configuration_doc_lists_every_flag_with_its_variable_and_default() -> None:
    documented = {row[0]: row for row in doc_rows() if row[0].startswith("`-")}
    expected = {f"`{flag.name}`": flag for flag in config.FLAGS}
    expected["`--collector.NAME`"] = config.collector_flag("NAME")
    assert sorted(documented) == sorted(expected)
    for name, flag in expected.items():
        row = documented[name]
        assert row[1] == f"`{flag.variable}`", name
        assert row[2] == flag.default_text, name
        assert row[3], f"{name} has no meaning in the table"


def test_the_configuration_doc_lists_every_deprecated_name() -> None:
    documented = {row[0]: row[1] for row in doc_rows() if row[0].startswith("`SCHEDWATCH_")}
    assert documented == {f"`{old}`": f"`{flag.variable}`" for old, flag in DEPRECATED.items()}


def test_the_configuration_doc_states_which_command_takes_which_group() -> None:
    text = CONFIGURATION_DOC.read_text()
    for group in config.GROUPS:
        assert f"## {group.capitalize()} flags" in text
