"""One typed settings object, filled from flags and SCHEDWATCH_* environment variables, validated once.

Every flag is declared once, as a :class:`Flag` in :data:`FLAGS`; its environment variable follows from its name by
one rule (:func:`variable_of`: ``--web.tls-cert-file`` -> ``SCHEDWATCH_WEB_TLS_CERT_FILE``). A flag on the command
line wins over its variable, the variable over a deprecated older name, and that over the default.
docs/configuration.md lists them all.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from agent import log, metrics
from agent.tables import kernel_memory, rows

# Outside 9100-9999, which Prometheus' list of exporter ports has used up.
DEFAULT_PORT = 17953
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
DEFAULT_WEB_MAX_CONNECTIONS = 64
DEFAULT_WEB_TIMEOUT = 10.0  # Prometheus' default scrape timeout: a scraper would have given up by then
WORKLOADS_BY = ("auto", "cgroup", "process")
MODES = ("auto", "bpf", "perf", "procfs")  # where counts come from (docs/modes.md)
SYSCALL_TIME = ("watched", "all")  # which workloads' system calls are timed (syscall_families collector)
MAX_TIMED_WORKLOADS = 1024
MAX_SAMPLE_FREQUENCY = 1000  # per CPU (agent/bpf/probes/oncpu.py)
MAX_CODE_TOP_K = 64
MAX_CODE_WORKLOADS = 1024


@dataclass(frozen=True)
class Settings:
    """Everything the agent can be told. Built by :func:`from_args`; immutable afterwards."""

    listen_host: str = "127.0.0.1"
    listen_port: int = DEFAULT_PORT
    collectors: frozenset[str] = frozenset()
    cgroup_root: Path | None = None  # None: the cgroup2 mount found in /proc/self/mountinfo
    state_dir: Path = Path("/run/schedwatch")
    max_cgroups: int = 4096
    max_processes: int = 16384
    max_threads: int = 65536
    process_top_k: int = 0
    series_grace_seconds: float = 300.0
    bpf_stats: bool = False
    docker_sockets: tuple[Path, ...] = ()
    kubelet_docker_sockets: tuple[Path, ...] = ()  # Docker APIs that are the kubelet's runtime (cri-dockerd)
    cri_sockets: tuple[Path, ...] = ()
    containerd_socket: Path | None = None
    containerd_namespaces: tuple[str, ...] = ()
    runtime_timeout: float = 1.0
    sidecar: bool = False
    workloads_by: str = "auto"
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    basic_auth_user: str = ""
    basic_auth_password_file: Path | None = None
    web_max_connections: int = DEFAULT_WEB_MAX_CONNECTIONS
    web_timeout: float = DEFAULT_WEB_TIMEOUT
    log_level: str = "info"
    log_format: str = "auto"
    mode: str = "auto"
    syscall_time: str = "watched"
    syscall_timed_workloads: int = 8
    perf_syscall_families: bool = False
    sample_frequency: int = 49
    code_top_k: int = 8
    code_workloads: int = 16


# Kernel memory each unit of a --max-* flag preallocates, from the bounded maps of the collectors' tables.
BYTES_PER_CGROUP = kernel_memory.bytes_per(rows.CGROUPS)
BYTES_PER_PROCESS = kernel_memory.bytes_per(rows.PROCESSES)
BYTES_PER_THREAD = kernel_memory.bytes_per(rows.THREADS)
BYTES_PER_TIMED_WORKLOAD = kernel_memory.bytes_per(rows.TIMED)
MAX_CGROUPS_LIMIT = 1 << 19  # of BYTES_PER_CGROUP each: about 440 MiB of kernel memory
MAX_PROCESSES_LIMIT = 1 << 20  # about 300 MiB
MAX_THREADS_LIMIT = 1 << 20  # about 290 MiB
MAX_WEB_CONNECTIONS_LIMIT = 1024  # each holds a thread and a file descriptor while it is open
BOOLEAN_WORDS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(("0", "false", "no", "off"), False)


class ConfigError(ValueError):
    """Settings that parse but do not fit together; the message is one line saying what to do."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr (exit 2), not the whole usage text before it."""

    def error(self, message: str) -> NoReturn:
        """Print '<prog>: error: <message>' and exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def boolean(text: str) -> bool:
    """1/0, true/false, yes/no, on/off in any case; anything else is an error, not a silent false."""
    value = BOOLEAN_WORDS.get(text.strip().lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a boolean: use 1/0, true/false, yes/no or on/off")
    return value


def listen_address(text: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 as '[::1]:PORT') -> (host, port)."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise argparse.ArgumentTypeError(f"'{text}' is not HOST:PORT, e.g. {DEFAULT_LISTEN} or 0.0.0.0:{DEFAULT_PORT}")
    return host, int(port_text)


def _whole_number(text: str) -> int:
    if not (text.strip().isascii() and text.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number >= 0")
    return int(text)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


def count(minimum: int, maximum: int, bytes_per_entry: int = 0, entry: str = "") -> Callable[[str], int]:
    """A converter for a whole-number flag within [minimum, maximum]; a map size says what it costs when too big."""

    def convert(text: str) -> int:
        value = _whole_number(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"'{text}' must be at least {minimum}")
        if value > maximum and bytes_per_entry:
            raise argparse.ArgumentTypeError(
                f"{value} would preallocate about {_mib(value * bytes_per_entry)} of kernel memory "
                f"({bytes_per_entry} bytes per {entry}); give at most {maximum} ({_mib(maximum * bytes_per_entry)})"
            )
        if value > maximum:
            raise argparse.ArgumentTypeError(f"'{text}' is too many{entry and f' ({entry})'}: give at most {maximum}")
        return value

    return convert


def seconds(maximum: float, zero_allowed: bool = True, why: str = "") -> Callable[[str], float]:
    """A converter for a flag in seconds: a finite number >= 0 (or > 0), at most *maximum*."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_allowed):
            bound = ">= 0" if zero_allowed else "> 0"
            raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds {bound}")
        if value > maximum:
            raise argparse.ArgumentTypeError(
                f"'{text}' is more than {maximum:g} seconds{why}: give at most {maximum:g}"
            )
        return value

    return convert


def choice(options: Sequence[str]) -> Callable[[str], str]:
    """A converter accepting one of *options* (argparse checks choices of flags, not of defaults)."""

    def convert(text: str) -> str:
        if text not in options:
            raise argparse.ArgumentTypeError(f"'{text}' is not one of {', '.join(options)}")
        return text

    return convert


_max_cgroups = count(1, MAX_CGROUPS_LIMIT, BYTES_PER_CGROUP, "cgroup in the syscalls, sched and families maps")
_max_processes = count(0, MAX_PROCESSES_LIMIT, BYTES_PER_PROCESS, "process in the syscalls and sched maps")
_max_threads = count(1, MAX_THREADS_LIMIT, BYTES_PER_THREAD, "thread in the sched, syscalls and families maps")
_process_top_k = count(0, MAX_PROCESSES_LIMIT)
_syscall_timed_workloads = count(0, MAX_TIMED_WORKLOADS, BYTES_PER_TIMED_WORKLOAD, "timed workload")
_sample_frequency = count(1, MAX_SAMPLE_FREQUENCY)
_code_top_k = count(1, MAX_CODE_TOP_K)
_code_workloads = count(0, MAX_CODE_WORKLOADS)
_series_grace = seconds(86400, why=", so a removed workload's series would stay for more than a day")
_runtime_timeout = seconds(60, zero_allowed=False, why=", so a stuck runtime could hold back names that long")
_web_max_connections = count(
    1, MAX_WEB_CONNECTIONS_LIMIT, entry="each open connection holds a thread and a file descriptor"
)
_web_timeout = seconds(300, zero_allowed=False, why=", so a stalled client could hold a connection that long")


def optional_path(text: str) -> Path | None:
    """A file or directory flag; empty means none (so that an empty variable unsets it)."""
    return Path(text) if text.strip() else None


# The groups of flags, by what reads them; each subcommand takes the groups it uses (agent/commands/agent_flags.py).
COLLECTION = "collection"  # what is counted and how: run, check and diagnose load the collectors with these
RUNTIME = "runtime"  # the container runtimes asked for names: run, check, diagnose
EXPORT = "export"  # per-process series, how long removed series stay, BPF run-time accounting: what /metrics carries
SERVING = "serving"  # where and how /metrics is served: run (check validates them)
LOGGING = "logging"
CLIENT = "client"  # how diagnose --from reaches an agent or a Prometheus behind TLS and basic auth
GROUPS = (COLLECTION, RUNTIME, EXPORT, SERVING, LOGGING, CLIENT)

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
        """Add the flag; its value stays NOT_GIVEN when it is not on the command line (see :func:`resolve`)."""
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


def collector_flag(name: str) -> Flag:
    """--collector.NAME / --no-collector.NAME for one registered collector."""
    return Flag(f"--collector.{name}", COLLECTION, f"turn the {name} collector on or off", True, switch=True)


FLAGS: tuple[Flag, ...] = (
    Flag(
        "--mode",
        COLLECTION,
        "where counts come from: bpf (programs in the kernel), perf (counting perf events for sched_yield and futex, "
        "/proc schedstat for run-queue wait), procfs (/proc and cgroup files alone); auto: bpf when it loads, else "
        "perf, else procfs; docs/modes.md",
        "auto",
        choices=MODES,
    ),
    Flag(
        "--cgroup-root",
        COLLECTION,
        "the host's cgroup mount, e.g. its /sys/fs/cgroup mounted into the agent's container at /host/sys/fs/cgroup "
        "(cgroup2; hybrid, v1 controllers and unified/; or v1 controllers alone)",
        None,
        optional_path,
        metavar="DIR",
        shown_default="this process's mounts",
    ),
    Flag(
        "--workloads-by",
        COLLECTION,
        "what the kernel maps are keyed by: cgroup (cgroup2 id) or process (placed by /proc/PID/cgroup, for hosts "
        "without cgroup2); auto: cgroup where cgroup2 is mounted, else process",
        "auto",
        choices=WORKLOADS_BY,
    ),
    Flag(
        "--syscall-time",
        COLLECTION,
        f"whose system calls are timed by family ({metrics.shown(metrics.SYSCALL_SECONDS)}; every workload's are "
        "counted): watched, the --syscall-timed-workloads making the most calls; all, every workload's (costs each "
        "system call more; docs/benchmarks.md)",
        "watched",
        choices=SYSCALL_TIME,
    ),
    Flag(
        "--syscall-timed-workloads",
        COLLECTION,
        f"with --syscall-time watched, how many workloads are timed at once, at most {MAX_TIMED_WORKLOADS}; 0: none",
        8,
        _syscall_timed_workloads,
        metavar="K",
    ),
    Flag(
        "--sample-frequency",
        COLLECTION,
        f"on-CPU samples per second on each CPU (the oncpu collector's cpu-clock timer), 1 to {MAX_SAMPLE_FREQUENCY}; "
        "the default costs about 0.3 % of a CPU (docs/benchmarks.md)",
        49,
        _sample_frequency,
        metavar="HZ",
    ),
    Flag(
        "--code-workloads",
        COLLECTION,
        "how many workloads' samples and call sites are named by library and function each read (the busiest); "
        f"the others' go to one (other) row; at most {MAX_CODE_WORKLOADS}; 0 names none and counts no call sites",
        16,
        _code_workloads,
        metavar="N",
    ),
    Flag(
        "--code-top-k",
        COLLECTION,
        f"rows by library and function exported per workload before the rest goes to (other), 1 to {MAX_CODE_TOP_K}",
        8,
        _code_top_k,
        metavar="K",
    ),
    Flag(
        "--perf-syscall-families",
        COLLECTION,
        "in perf mode, count the system calls of the families yield, futex, clock, sleep, poll, memory and process "
        f"too ({metrics.shown(metrics.SYSCALLS)}): 37 instead of 10 counters per cgroup and CPU, so within the same "
        "file-descriptor budget fewer cgroups get counters of their own",
        False,
        switch=True,
    ),
    Flag(
        "--state-dir",
        COLLECTION,
        "where the agent keeps its own files, e.g. a merged kernel-headers tree",
        Path("/run/schedwatch"),
        Path,
        metavar="DIR",
    ),
    Flag(
        "--max-cgroups",
        COLLECTION,
        f"capacity of the per-cgroup BPF maps, {BYTES_PER_CGROUP} bytes of kernel memory each, at most "
        f"{MAX_CGROUPS_LIMIT}; at least 16384 when keyed by process",
        4096,
        _max_cgroups,
        metavar="N",
    ),
    Flag(
        "--max-threads",
        COLLECTION,
        f"capacity of the per-thread BPF maps, e.g. futex calls in progress, {BYTES_PER_THREAD} bytes of kernel "
        f"memory each, at most {MAX_THREADS_LIMIT}",
        65536,
        _max_threads,
        metavar="N",
    ),
    Flag(
        "--sidecar",
        COLLECTION,
        "watch only the processes of the agent's own pid namespace (a pod with shareProcessNamespace); per-process "
        "series then carry the pod's pids",
        False,
        switch=True,
    ),
    Flag(
        "--runtime.docker-sockets",
        RUNTIME,
        "Docker-API sockets to ask for container names, comma-separated; Podman serves the same API; empty: none",
        "/var/run/docker.sock,/run/podman/podman.sock",
        metavar="LIST",
        deprecated=("SCHEDWATCH_DOCKER_SOCKETS",),
    ),
    Flag(
        "--runtime.kubelet-docker-sockets",
        RUNTIME,
        "Docker-API sockets of the kubelet's own runtime (cri-dockerd), comma-separated: only on these are the "
        "io.kubernetes.* labels trusted as pod and namespace names, since any user of a Docker or Podman socket can "
        "set them",
        "",
        metavar="LIST",
        deprecated=("SCHEDWATCH_KUBELET_DOCKER_SOCKETS",),
    ),
    Flag(
        "--runtime.cri-sockets",
        RUNTIME,
        "CRI sockets (containerd, CRI-O) to ask for the kubelet's container, pod and namespace names, "
        "comma-separated; empty: none",
        "/run/containerd/containerd.sock,/run/crio/crio.sock",
        metavar="LIST",
        deprecated=("SCHEDWATCH_CRI_SOCKETS",),
    ),
    Flag(
        "--runtime.containerd-socket",
        RUNTIME,
        "containerd's socket, asked through containerd's own API for containers the CRI does not know (created "
        "with ctr or nerdctl); empty: none",
        "/run/containerd/containerd.sock",
        metavar="PATH",
        deprecated=("SCHEDWATCH_CONTAINERD_SOCKET",),
    ),
    Flag(
        "--runtime.containerd-namespaces",
        RUNTIME,
        "containerd namespaces to search, in order, comma-separated",
        "k8s.io,moby,default",
        metavar="LIST",
        deprecated=("SCHEDWATCH_CONTAINERD_NAMESPACES",),
    ),
    Flag(
        "--runtime.timeout",
        RUNTIME,
        "seconds one runtime lookup may take, more than 0 and at most 60; lookups run in the background, never in "
        "a scrape",
        1.0,
        _runtime_timeout,
        metavar="S",
        shown_default="1",
    ),
    Flag(
        "--process-top-k",
        EXPORT,
        "export per-process series for the K most active processes, at most --max-processes; costs one more hash "
        "lookup per event in the kernel (0: per-workload series only)",
        0,
        _process_top_k,
        metavar="K",
    ),
    Flag(
        "--max-processes",
        EXPORT,
        f"capacity of the per-process BPF maps, {BYTES_PER_PROCESS} bytes of kernel memory each, at most "
        f"{MAX_PROCESSES_LIMIT}; used only with --process-top-k, 0 turns per-process accounting off",
        16384,
        _max_processes,
        metavar="N",
    ),
    Flag(
        "--series-grace",
        EXPORT,
        "seconds a removed workload's series stay exported, at most 86400",
        300.0,
        _series_grace,
        metavar="S",
        shown_default="300",
    ),
    Flag(
        "--bpf-stats",
        EXPORT,
        "turn on the kernel's BPF run-time accounting while the agent runs, for "
        f"{metrics.shown(metrics.BPF_PROGRAM_RUNS, metrics.BPF_PROGRAM_RUN_SECONDS)} "
        "(costs every BPF program ~20 ns per run; needs CAP_SYS_ADMIN)",
        False,
        switch=True,
    ),
    Flag(
        "--listen",
        SERVING,
        "address to serve /metrics on, HOST:PORT ([::1]:PORT for IPv6)",
        listen_address(DEFAULT_LISTEN),
        listen_address,
        metavar="HOST:PORT",
        shown_default=DEFAULT_LISTEN,
    ),
    Flag(
        "--web.tls-cert-file",
        SERVING,
        "serve /metrics over TLS (1.2 or later) with this certificate (PEM), together with --web.tls-key-file",
        None,
        optional_path,
        metavar="FILE",
        deprecated=("SCHEDWATCH_TLS_CERT_FILE",),
    ),
    Flag(
        "--web.tls-key-file",
        SERVING,
        "the TLS certificate's private key (PEM)",
        None,
        optional_path,
        metavar="FILE",
        deprecated=("SCHEDWATCH_TLS_KEY_FILE",),
    ),
    Flag(
        "--web.basic-auth-user",
        SERVING,
        "require HTTP basic auth with this user, and the password in --web.basic-auth-password-file",
        "",
        metavar="USER",
        deprecated=("SCHEDWATCH_BASIC_AUTH_USER",),
    ),
    Flag(
        "--web.basic-auth-password-file",
        SERVING,
        "file holding the basic-auth password (a file, so that it never shows in `ps`)",
        None,
        optional_path,
        metavar="FILE",
        deprecated=("SCHEDWATCH_BASIC_AUTH_PASSWORD_FILE",),
    ),
    Flag(
        "--web.max-connections",
        SERVING,
        f"connections to /metrics open at once, at most {MAX_WEB_CONNECTIONS_LIMIT}; at the bound a new connection "
        "takes the slot of the oldest one still sending its request, or is closed when all are being answered",
        DEFAULT_WEB_MAX_CONNECTIONS,
        _web_max_connections,
        metavar="N",
    ),
    Flag(
        "--web.timeout",
        SERVING,
        "seconds a connection has to deliver its request, TLS handshake included, and that any read or write may "
        "stall; more than 0, at most 300",
        DEFAULT_WEB_TIMEOUT,
        _web_timeout,
        metavar="S",
        shown_default=f"{DEFAULT_WEB_TIMEOUT:g}",
    ),
    Flag("--log-level", LOGGING, "the least severe log lines written (to stderr)", "info", choices=log.LEVELS),
    Flag(
        "--log-format",
        LOGGING,
        "json: one JSON object a line; console: for a person; auto: console on a terminal, else json",
        "auto",
        choices=log.FORMATS,
    ),
    Flag(
        "--from.tls-ca-file",
        CLIENT,
        "with --from https://...: the CA certificates (PEM) the server's certificate must be signed by",
        None,
        optional_path,
        metavar="FILE",
        shown_default="the system's CAs",
    ),
    Flag(
        "--from.tls-cert-file",
        CLIENT,
        "with --from https://...: a client certificate (PEM) to give a server that asks for one (mutual TLS), "
        "together with --from.tls-key-file",
        None,
        optional_path,
        metavar="FILE",
    ),
    Flag(
        "--from.tls-key-file",
        CLIENT,
        "the client certificate's private key (PEM)",
        None,
        optional_path,
        metavar="FILE",
    ),
    Flag(
        "--from.tls-server-name",
        CLIENT,
        "the name the server's certificate must carry, when it is not the host in --from (e.g. the certificate "
        "names schedwatch and --from is https://127.0.0.1:17953)",
        "",
        metavar="NAME",
        shown_default="the host in --from",
    ),
    Flag(
        "--from.basic-auth-user",
        CLIENT,
        "log in to the agent or the Prometheus with HTTP basic auth as this user, with the password in "
        "--from.basic-auth-password-file",
        "",
        metavar="USER",
    ),
    Flag(
        "--from.basic-auth-password-file",
        CLIENT,
        "file holding the basic-auth password (a file, so that it never shows in `ps` or the shell's history)",
        None,
        optional_path,
        metavar="FILE",
    ),
)


def flags_of(groups: Sequence[str], collector_names: Sequence[str] = ()) -> list[Flag]:
    """The flags of *groups*, in declaration order; COLLECTION begins with one --collector.NAME per collector."""
    collectors = [collector_flag(name) for name in collector_names] if COLLECTION in groups else []
    return collectors + [flag for flag in FLAGS if flag.group in groups]


def add_flags(parser: argparse.ArgumentParser, groups: Sequence[str], collector_names: Sequence[str] = ()) -> None:
    """Add the flags of *groups* to *parser*, each under its group's heading in --help."""
    for group in GROUPS:
        if group in groups:
            section = parser.add_argument_group(f"{group} flags")
            for flag in flags_of([group], collector_names):
                flag.add_to(section)


AGENT_GROUPS = (COLLECTION, RUNTIME, EXPORT, SERVING, LOGGING)  # `schedwatch run`'s (and check's)


def add_arguments(parser: argparse.ArgumentParser, collector_names: list[str]) -> None:
    """The flags of `schedwatch run`: every group but the client's."""
    add_flags(parser, AGENT_GROUPS, collector_names)


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


def from_args(args: argparse.Namespace, collector_names: list[str]) -> Settings:
    """Build the settings from parsed flags and the environment; raises ConfigError. Flags of groups the command
    does not take keep their defaults."""
    value = resolve(args, flags_of(GROUPS, collector_names))
    if value["process_top_k"] > value["max_processes"]:
        raise ConfigError(
            f"--process-top-k {value['process_top_k']} is more than --max-processes {value['max_processes']}, the "
            "processes the kernel keeps: raise --max-processes or lower --process-top-k"
        )
    host, port = value["listen"]
    containerd_socket = value["runtime_containerd_socket"].strip()
    return Settings(
        listen_host=host,
        listen_port=port,
        collectors=frozenset(name for name in collector_names if value[f"collector_{name}"]),
        cgroup_root=value["cgroup_root"],
        state_dir=value["state_dir"],
        max_cgroups=value["max_cgroups"],
        max_processes=value["max_processes"] if value["process_top_k"] > 0 else 0,
        max_threads=value["max_threads"],
        process_top_k=value["process_top_k"],
        series_grace_seconds=value["series_grace"],
        bpf_stats=value["bpf_stats"],
        docker_sockets=tuple(Path(p) for p in _items(value["runtime_docker_sockets"])),
        kubelet_docker_sockets=tuple(Path(p) for p in _items(value["runtime_kubelet_docker_sockets"])),
        cri_sockets=tuple(Path(p) for p in _items(value["runtime_cri_sockets"])),
        containerd_socket=Path(containerd_socket) if containerd_socket else None,
        containerd_namespaces=_items(value["runtime_containerd_namespaces"]),
        runtime_timeout=value["runtime_timeout"],
        sidecar=value["sidecar"],
        workloads_by=value["workloads_by"],
        tls_cert_file=value["web_tls_cert_file"],
        tls_key_file=value["web_tls_key_file"],
        basic_auth_user=value["web_basic_auth_user"],
        basic_auth_password_file=value["web_basic_auth_password_file"],
        web_max_connections=value["web_max_connections"],
        web_timeout=value["web_timeout"],
        log_level=value["log_level"],
        log_format=value["log_format"],
        mode=value["mode"],
        syscall_time=value["syscall_time"],
        syscall_timed_workloads=value["syscall_timed_workloads"],
        perf_syscall_families=value["perf_syscall_families"],
        sample_frequency=value["sample_frequency"],
        code_top_k=value["code_top_k"],
        code_workloads=value["code_workloads"],
    )


@dataclass(frozen=True)
class ClientSettings:
    """How diagnose reaches the agent or the Prometheus named by --from: TLS and basic auth (the CLIENT flags)."""

    tls_ca_file: Path | None = None  # None: the system's CAs
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_server_name: str = ""  # "": the host in the URL
    basic_auth_user: str = ""
    basic_auth_password_file: Path | None = None

    @property
    def uses_tls(self) -> bool:
        """Whether any TLS option is set (they mean nothing to an http:// URL)."""
        return any((self.tls_ca_file, self.tls_cert_file, self.tls_key_file, self.tls_server_name))


def client_from_args(args: argparse.Namespace) -> ClientSettings:
    """The client settings from the CLIENT flags and their variables; raises ConfigError when they do not fit."""
    value = resolve(args, flags_of([CLIENT]))
    client = ClientSettings(
        tls_ca_file=value["from_tls_ca_file"],
        tls_cert_file=value["from_tls_cert_file"],
        tls_key_file=value["from_tls_key_file"],
        tls_server_name=value["from_tls_server_name"].strip(),
        basic_auth_user=value["from_basic_auth_user"],
        basic_auth_password_file=value["from_basic_auth_password_file"],
    )
    if (client.tls_cert_file is None) != (client.tls_key_file is None):
        raise ConfigError("--from.tls-cert-file and --from.tls-key-file go together: give both or neither")
    if bool(client.basic_auth_user) != (client.basic_auth_password_file is not None):
        raise ConfigError(
            "--from.basic-auth-user and --from.basic-auth-password-file go together: give both or neither"
        )
    return client


def _items(text: str) -> tuple[str, ...]:
    """A comma-separated flag value: its non-empty items, stripped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def web_security(settings: Settings) -> tuple[tuple[Path, Path] | None, tuple[str, str] | None]:
    """(TLS cert and key, basic-auth user and password) from the settings, checked; raises ConfigError."""
    tls = None
    if (settings.tls_cert_file is None) != (settings.tls_key_file is None):
        raise ConfigError("--web.tls-cert-file and --web.tls-key-file go together: give both or neither")
    if settings.tls_cert_file is not None and settings.tls_key_file is not None:
        for path in (settings.tls_cert_file, settings.tls_key_file):
            if not path.is_file():
                raise ConfigError(f"{path} does not exist: give a PEM file readable by the agent")
        tls = (settings.tls_cert_file, settings.tls_key_file)
    auth = None
    if bool(settings.basic_auth_user) != (settings.basic_auth_password_file is not None):
        raise ConfigError("--web.basic-auth-user and --web.basic-auth-password-file go together: give both or neither")
    if settings.basic_auth_password_file is not None:
        try:
            password = settings.basic_auth_password_file.read_text().rstrip("\n")
        except OSError as error:
            raise ConfigError(f"cannot read {settings.basic_auth_password_file}: {error.strerror}") from error
        if not password:
            raise ConfigError(f"{settings.basic_auth_password_file} is empty: put the password in it")
        auth = (settings.basic_auth_user, password)
    return tls, auth
