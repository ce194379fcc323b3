"""One typed settings object, filled from flags and SCHEDWATCH_* environment variables, validated once."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from agent import log

# Outside 9100-9999, which Prometheus' list of exporter ports has used up.
DEFAULT_PORT = 17953
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"


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
    log_level: str = "info"
    log_format: str = "auto"


def _env(name: str, default: str) -> str:
    return os.environ.get(f"SCHEDWATCH_{name}", default)


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(f"SCHEDWATCH_{name}")
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def listen_address(text: str) -> tuple[str, int]:
    """'HOST:PORT' (IPv6 as '[::1]:PORT') -> (host, port)."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise argparse.ArgumentTypeError(f"'{text}' is not HOST:PORT, e.g. {DEFAULT_LISTEN} or 0.0.0.0:{DEFAULT_PORT}")
    return host, int(port_text)


def _non_negative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number >= 0")
    return int(text)


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be at least 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds >= 0")
    return value


def add_arguments(parser: argparse.ArgumentParser, collector_names: list[str]) -> None:
    """Flags shared by `run` and `check`. Every flag's default comes from SCHEDWATCH_<NAME>."""
    parser.add_argument(
        "--listen",
        type=listen_address,
        default=_env("LISTEN", DEFAULT_LISTEN),
        help=f"address to serve /metrics on (default {DEFAULT_LISTEN}; env SCHEDWATCH_LISTEN)",
    )
    for name in collector_names:
        parser.add_argument(
            f"--collector.{name}",
            dest=f"collector_{name}",
            action=argparse.BooleanOptionalAction,
            default=_env_flag(f"COLLECTOR_{name.upper()}", True),
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
        choices=("auto", "cgroup", "process"),
        default=_env("WORKLOADS_BY", "auto"),
        help="what the kernel maps are keyed by: cgroup (cgroup2 id) or process (placed by /proc/PID/cgroup, for "
        "hosts without cgroup2); auto: cgroup where cgroup2 is mounted, else process (default auto)",
    )
    parser.add_argument(
        "--max-cgroups",
        type=_positive_int,
        default=_env("MAX_CGROUPS", "4096"),
        help="capacity of the per-cgroup BPF maps (default 4096; at least 16384 when keyed by process)",
    )
    parser.add_argument(
        "--max-processes",
        type=_non_negative_int,
        default=_env("MAX_PROCESSES", "16384"),
        help="capacity of the per-process BPF map; 0 turns per-process accounting off (default 16384)",
    )
    parser.add_argument(
        "--max-threads",
        type=_positive_int,
        default=_env("MAX_THREADS", "65536"),
        help="capacity of per-thread BPF maps, e.g. futex calls in progress (default 65536)",
    )
    parser.add_argument(
        "--process-top-k",
        type=_non_negative_int,
        default=_env("PROCESS_TOP_K", "0"),
        help="export per-process series for the K most active processes; costs one more hash lookup per "
        "event in the kernel (default 0: per-workload series only)",
    )
    parser.add_argument(
        "--series-grace",
        type=_seconds,
        default=_env("SERIES_GRACE", "300"),
        help="seconds a removed workload's series stay exported (default 300)",
    )
    parser.add_argument(
        "--bpf-stats",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("BPF_STATS", False),
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
        type=_seconds,
        default=_env("RUNTIME_TIMEOUT", "1"),
        help="seconds one runtime lookup may take; lookups run in the background, never in a scrape (default 1)",
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
        "--sidecar",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("SIDECAR", False),
        help="watch only the processes of the agent's own pid namespace (a pod with shareProcessNamespace); "
        "per-process series then carry the pod's pids",
    )
    parser.add_argument("--log-level", choices=log.LEVELS, default=_env("LOG_LEVEL", "info"))
    parser.add_argument("--log-format", choices=log.FORMATS, default=_env("LOG_FORMAT", "auto"))


def from_args(args: argparse.Namespace, collector_names: list[str]) -> Settings:
    """Build the settings from parsed flags."""
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
        log_level=args.log_level,
        log_format=args.log_format,
    )


def _items(text: str) -> tuple[str, ...]:
    """A comma-separated flag value: its non-empty items, stripped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


class ConfigError(ValueError):
    """Settings that parse but do not fit together; the message is one line saying what to do."""


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
