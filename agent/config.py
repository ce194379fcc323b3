"""One typed settings object, filled from flags and SCHEDWATCH_* environment variables, validated once."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from agent import log

# Outside 9100-9999, which Prometheus' list of exporter ports has used up.
DEFAULT_PORT = 17953
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
DEFAULT_WEB_MAX_CONNECTIONS = 64
DEFAULT_WEB_TIMEOUT = 10.0  # Prometheus' default scrape timeout: a scraper would have given up by then
WORKLOADS_BY = ("auto", "cgroup", "process")
MODES = ("auto", "bpf", "perf", "procfs")  # where counts come from (docs/modes.md)
SYSCALL_TIME = ("watched", "all")  # which workloads' system calls are timed (syscall_families collector)
MAX_TIMED_WORKLOADS = 1024


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


# Kernel memory each unit of a --max-* flag preallocates (BPF hash maps are preallocated at load), summed over the
# maps it sizes in bpf/*.c: element header (48 B) + key and value rounded to 8 B + bucket share (16 B), as bpftool
# reports a map's memlock on Linux 6.18. Per cgroup: syscalls `cgroups` (u64 -> struct cgroup_stats, 128 B) 200 B +
# sched `cgroups` (u64 -> struct cgroup_sched, 120 B) 192 B + families `cgroups` (u64 -> struct workload_syscalls,
# 168 B) 240 B. Per process: struct process_stats (72 B) 144 B + struct process_sched (40 B) 112 B. Per thread:
# sched `threads` (struct thread_state, 40 B) 112 B + syscalls `futex_start` (u64) 80 B + families
# `calls_in_progress` (struct call_in_progress, 24 B) 96 B. Per timed workload: families `timed_workloads` (u8) 80 B.
BYTES_PER_CGROUP = 632
BYTES_PER_PROCESS = 256
BYTES_PER_THREAD = 288
BYTES_PER_TIMED_WORKLOAD = 80
MAX_CGROUPS_LIMIT = 1 << 19  # 316 MiB of kernel memory
MAX_PROCESSES_LIMIT = 1 << 20  # 256 MiB
MAX_THREADS_LIMIT = 1 << 20  # 288 MiB
MAX_WEB_CONNECTIONS_LIMIT = 1024  # each holds a thread and a file descriptor while it is open
BOOLEAN_WORDS = dict.fromkeys(("1", "true", "yes", "on"), True) | dict.fromkeys(("0", "false", "no", "off"), False)


class ConfigError(ValueError):
    """Settings that parse but do not fit together; the message is one line saying what to do."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr (exit 2), not the whole usage text before it."""

    def error(self, message: str) -> NoReturn:
        """Print '<prog>: error: <message>' and exit 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


@dataclass(frozen=True)
class _FromEnvironment:
    """A flag's default taken from SCHEDWATCH_<NAME>, converted (and checked) only once the flags are parsed."""

    variable: str
    text: str
    convert: Callable[[str], object]


def _env(name: str, default: str) -> str:
    return os.environ.get(f"SCHEDWATCH_{name}", default)


def _env_default(name: str, default: object, convert: Callable[[str], object]) -> object:
    """*default*, or SCHEDWATCH_<NAME> when it is set (converted by :func:`from_args`, which names the variable)."""
    text = os.environ.get(f"SCHEDWATCH_{name}")
    return default if text is None else _FromEnvironment(f"SCHEDWATCH_{name}", text, convert)


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
_series_grace = seconds(86400, why=", so a removed workload's series would stay for more than a day")
_runtime_timeout = seconds(60, zero_allowed=False, why=", so a stuck runtime could hold back names that long")
_web_max_connections = count(
    1, MAX_WEB_CONNECTIONS_LIMIT, entry="each open connection holds a thread and a file descriptor"
)
_web_timeout = seconds(300, zero_allowed=False, why=", so a stalled client could hold a connection that long")


def add_arguments(parser: argparse.ArgumentParser, collector_names: list[str]) -> None:
    """Flags shared by `run` and `check`. Every flag's default comes from SCHEDWATCH_<NAME>."""
    parser.add_argument(
        "--listen",
        type=listen_address,
        default=_env_default("LISTEN", listen_address(DEFAULT_LISTEN), listen_address),
        help=f"address to serve /metrics on (default {DEFAULT_LISTEN}; env SCHEDWATCH_LISTEN)",
    )
    for name in collector_names:
        parser.add_argument(
            f"--collector.{name}",
            dest=f"collector_{name}",
            action=argparse.BooleanOptionalAction,
            default=_env_default(f"COLLECTOR_{name.upper()}", True, boolean),
            help=f"enable the {name} collector (default on; env SCHEDWATCH_COLLECTOR_{name.upper()})",
        )
    parser.add_argument(
        "--cgroup-root",
        type=Path,
        default=os.environ.get("SCHEDWATCH_CGROUP_ROOT"),
        help="the host's cgroup mount, e.g. its /sys/fs/cgroup mounted into the agent's container at "
        "/host/sys/fs/cgroup (cgroup2; hybrid, v1 controllers and unified/; or v1 controllers alone); "
        "default: this process's mounts",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(_env("STATE_DIR", "/run/schedwatch")),
        help="where the agent keeps its own files, e.g. a merged kernel-headers tree (default /run/schedwatch)",
    )
    parser.add_argument(
        "--workloads-by",
        dest="workloads_by",
        choices=WORKLOADS_BY,
        default=_env_default("WORKLOADS_BY", "auto", choice(WORKLOADS_BY)),
        help="what the kernel maps are keyed by: cgroup (cgroup2 id) or process (placed by /proc/PID/cgroup, for "
        "hosts without cgroup2); auto: cgroup where cgroup2 is mounted, else process (default auto)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default=_env_default("MODE", "auto", choice(MODES)),
        help="where counts come from: bpf (programs in the kernel), perf (counting perf events for sched_yield and "
        "futex, /proc schedstat for run-queue wait), procfs (/proc and cgroup files alone); auto: bpf when it "
        "loads, else perf, else procfs (default auto; env SCHEDWATCH_MODE; docs/modes.md)",
    )
    parser.add_argument(
        "--max-cgroups",
        type=_max_cgroups,
        default=_env_default("MAX_CGROUPS", 4096, _max_cgroups),
        help=f"capacity of the per-cgroup BPF maps, {BYTES_PER_CGROUP} bytes of kernel memory each, at most "
        f"{MAX_CGROUPS_LIMIT} (default 4096; at least 16384 when keyed by process)",
    )
    parser.add_argument(
        "--max-processes",
        type=_max_processes,
        default=_env_default("MAX_PROCESSES", 16384, _max_processes),
        help=f"capacity of the per-process BPF maps, {BYTES_PER_PROCESS} bytes of kernel memory each, at most "
        f"{MAX_PROCESSES_LIMIT}; 0 turns per-process accounting off (default 16384)",
    )
    parser.add_argument(
        "--max-threads",
        type=_max_threads,
        default=_env_default("MAX_THREADS", 65536, _max_threads),
        help=f"capacity of the per-thread BPF maps, e.g. futex calls in progress, {BYTES_PER_THREAD} bytes of "
        f"kernel memory each, at most {MAX_THREADS_LIMIT} (default 65536)",
    )
    parser.add_argument(
        "--process-top-k",
        type=_process_top_k,
        default=_env_default("PROCESS_TOP_K", 0, _process_top_k),
        help="export per-process series for the K most active processes, at most --max-processes; costs one more "
        "hash lookup per event in the kernel (default 0: per-workload series only)",
    )
    parser.add_argument(
        "--syscall-time",
        dest="syscall_time",
        choices=SYSCALL_TIME,
        default=_env_default("SYSCALL_TIME", "watched", choice(SYSCALL_TIME)),
        help="whose system calls are timed by family (schedwatch_syscall_seconds_total; every workload's are "
        "counted): watched, the --syscall-timed-workloads making the most calls; all, every workload's (costs "
        "each system call more; docs/benchmarks.md) (default watched)",
    )
    parser.add_argument(
        "--syscall-timed-workloads",
        dest="syscall_timed_workloads",
        type=_syscall_timed_workloads,
        default=_env_default("SYSCALL_TIMED_WORKLOADS", 8, _syscall_timed_workloads),
        help=f"with --syscall-time watched, how many workloads are timed at once, at most {MAX_TIMED_WORKLOADS}; "
        "0: none (default 8)",
    )
    parser.add_argument(
        "--perf-syscall-families",
        dest="perf_syscall_families",
        action=argparse.BooleanOptionalAction,
        default=_env_default("PERF_SYSCALL_FAMILIES", False, boolean),
        help="in perf mode, count the system calls of the families yield, futex, clock, sleep, poll, memory and "
        "process too (schedwatch_syscalls_total): 37 instead of 10 counters per cgroup and CPU, so within the same "
        "file-descriptor budget fewer cgroups get counters of their own (default off)",
    )
    parser.add_argument(
        "--series-grace",
        type=_series_grace,
        default=_env_default("SERIES_GRACE", 300.0, _series_grace),
        help="seconds a removed workload's series stay exported, at most 86400 (default 300)",
    )
    parser.add_argument(
        "--bpf-stats",
        action=argparse.BooleanOptionalAction,
        default=_env_default("BPF_STATS", False, boolean),
        help="turn on the kernel's BPF run-time accounting while the agent runs, for the "
        "schedwatch_bpf_program_* metrics (costs every BPF program ~20 ns per run)",
    )
    parser.add_argument(
        "--runtime.docker-sockets",
        dest="docker_sockets",
        default=_env("DOCKER_SOCKETS", "/var/run/docker.sock,/run/podman/podman.sock"),
        help="Docker-API sockets to ask for container names, comma-separated; Podman serves the same API "
        "(default /var/run/docker.sock,/run/podman/podman.sock; empty: none)",
    )
    parser.add_argument(
        "--runtime.kubelet-docker-sockets",
        dest="kubelet_docker_sockets",
        default=_env("KUBELET_DOCKER_SOCKETS", ""),
        help="Docker-API sockets of the kubelet's own runtime (cri-dockerd), comma-separated: only on these are "
        "the io.kubernetes.* labels trusted as pod and namespace names, since any user of a Docker or Podman "
        "socket can set them (default: none)",
    )
    parser.add_argument(
        "--runtime.cri-sockets",
        dest="cri_sockets",
        default=_env("CRI_SOCKETS", "/run/containerd/containerd.sock,/run/crio/crio.sock"),
        help="CRI sockets (containerd, CRI-O) to ask for the kubelet's container, pod and namespace names, "
        "comma-separated (default /run/containerd/containerd.sock,/run/crio/crio.sock; empty: none)",
    )
    parser.add_argument(
        "--runtime.containerd-socket",
        dest="containerd_socket",
        default=_env("CONTAINERD_SOCKET", "/run/containerd/containerd.sock"),
        help="containerd's socket, asked through containerd's own API for containers the CRI does not know "
        "(created with ctr or nerdctl) (empty: none)",
    )
    parser.add_argument(
        "--runtime.containerd-namespaces",
        dest="containerd_namespaces",
        default=_env("CONTAINERD_NAMESPACES", "k8s.io,moby,default"),
        help="containerd namespaces to search, in order (default k8s.io,moby,default)",
    )
    parser.add_argument(
        "--runtime.timeout",
        dest="runtime_timeout",
        type=_runtime_timeout,
        default=_env_default("RUNTIME_TIMEOUT", 1.0, _runtime_timeout),
        help="seconds one runtime lookup may take, more than 0 and at most 60; lookups run in the background, "
        "never in a scrape (default 1)",
    )
    parser.add_argument(
        "--web.tls-cert-file",
        dest="tls_cert_file",
        type=Path,
        default=os.environ.get("SCHEDWATCH_TLS_CERT_FILE"),
        help="serve /metrics over TLS with this certificate (PEM), together with --web.tls-key-file",
    )
    parser.add_argument(
        "--web.tls-key-file",
        dest="tls_key_file",
        type=Path,
        default=os.environ.get("SCHEDWATCH_TLS_KEY_FILE"),
        help="the TLS certificate's private key (PEM)",
    )
    parser.add_argument(
        "--web.basic-auth-user",
        dest="basic_auth_user",
        default=_env("BASIC_AUTH_USER", ""),
        help="require HTTP basic auth with this user, and the password in --web.basic-auth-password-file",
    )
    parser.add_argument(
        "--web.basic-auth-password-file",
        dest="basic_auth_password_file",
        type=Path,
        default=os.environ.get("SCHEDWATCH_BASIC_AUTH_PASSWORD_FILE"),
        help="file holding the basic-auth password (a file, so that it never shows in `ps`)",
    )
    parser.add_argument(
        "--web.max-connections",
        dest="web_max_connections",
        type=_web_max_connections,
        default=_env_default("WEB_MAX_CONNECTIONS", DEFAULT_WEB_MAX_CONNECTIONS, _web_max_connections),
        help="connections to /metrics open at once, at most 1024; at the bound a new connection takes the slot of "
        "the oldest one still sending its request, or is closed when all are being answered "
        f"(default {DEFAULT_WEB_MAX_CONNECTIONS}; env SCHEDWATCH_WEB_MAX_CONNECTIONS)",
    )
    parser.add_argument(
        "--web.timeout",
        dest="web_timeout",
        type=_web_timeout,
        default=_env_default("WEB_TIMEOUT", DEFAULT_WEB_TIMEOUT, _web_timeout),
        help="seconds a connection has to deliver its request, TLS handshake included, and that any read or write "
        f"may stall; more than 0, at most 300 (default {DEFAULT_WEB_TIMEOUT:g}; env SCHEDWATCH_WEB_TIMEOUT)",
    )
    parser.add_argument(
        "--sidecar",
        action=argparse.BooleanOptionalAction,
        default=_env_default("SIDECAR", False, boolean),
        help="watch only the processes of the agent's own pid namespace (a pod with shareProcessNamespace); "
        "per-process series then carry the pod's pids",
    )
    parser.add_argument(
        "--log-level", choices=log.LEVELS, default=_env_default("LOG_LEVEL", "info", choice(log.LEVELS))
    )
    parser.add_argument(
        "--log-format", choices=log.FORMATS, default=_env_default("LOG_FORMAT", "auto", choice(log.FORMATS))
    )


def from_args(args: argparse.Namespace, collector_names: list[str]) -> Settings:
    """Build the settings from parsed flags, converting defaults taken from the environment; raises ConfigError."""
    _convert_environment(args)
    if args.process_top_k > args.max_processes:
        raise ConfigError(
            f"--process-top-k {args.process_top_k} is more than --max-processes {args.max_processes}, the processes "
            "the kernel keeps: raise --max-processes or lower --process-top-k"
        )
    host, port = args.listen
    enabled = frozenset(name for name in collector_names if getattr(args, f"collector_{name}"))
    return Settings(
        listen_host=host,
        listen_port=port,
        collectors=enabled,
        cgroup_root=args.cgroup_root,
        state_dir=args.state_dir,
        max_cgroups=args.max_cgroups,
        max_processes=args.max_processes if args.process_top_k > 0 else 0,
        max_threads=args.max_threads,
        process_top_k=args.process_top_k,
        series_grace_seconds=args.series_grace,
        bpf_stats=args.bpf_stats,
        docker_sockets=tuple(Path(p) for p in _items(args.docker_sockets)),
        kubelet_docker_sockets=tuple(Path(p) for p in _items(args.kubelet_docker_sockets)),
        cri_sockets=tuple(Path(p) for p in _items(args.cri_sockets)),
        containerd_socket=Path(args.containerd_socket.strip()) if args.containerd_socket.strip() else None,
        containerd_namespaces=_items(args.containerd_namespaces),
        runtime_timeout=args.runtime_timeout,
        sidecar=args.sidecar,
        workloads_by=args.workloads_by,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        basic_auth_user=args.basic_auth_user,
        basic_auth_password_file=args.basic_auth_password_file,
        web_max_connections=args.web_max_connections,
        web_timeout=args.web_timeout,
        log_level=args.log_level,
        log_format=args.log_format,
        mode=args.mode,
        syscall_time=args.syscall_time,
        syscall_timed_workloads=args.syscall_timed_workloads,
        perf_syscall_families=args.perf_syscall_families,
    )


def _convert_environment(args: argparse.Namespace) -> None:
    """Replace every default taken from the environment by its value; a bad one is an error naming the variable."""
    for name, value in vars(args).items():
        if isinstance(value, _FromEnvironment):
            try:
                setattr(args, name, value.convert(value.text))
            except argparse.ArgumentTypeError as error:
                raise ConfigError(f"environment variable {value.variable}: {error}") from None


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
