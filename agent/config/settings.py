"""The agent's settings: one typed, immutable object built from the flags of the collection, runtime, export,
serving and logging groups and their variables, validated once; and the check of the serving flags' files."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from agent.config.flag import GROUPS
from agent.config.resolve import ConfigError, resolve
from agent.config.table import flags_of
from agent.config.values import DEFAULT_PORT, DEFAULT_WEB_MAX_CONNECTIONS, DEFAULT_WEB_TIMEOUT, items


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


def from_args(args: argparse.Namespace, collector_names: list[str], on_by_default: Collection[str] = ()) -> Settings:
    """Build the settings from parsed flags and the environment; raises ConfigError. Flags of groups the command
    does not take keep their defaults; collectors of OFF_BY_DEFAULT are on by default when in *on_by_default*."""
    value = resolve(args, flags_of(GROUPS, collector_names, on_by_default))
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
        docker_sockets=tuple(Path(p) for p in items(value["runtime_docker_sockets"])),
        kubelet_docker_sockets=tuple(Path(p) for p in items(value["runtime_kubelet_docker_sockets"])),
        cri_sockets=tuple(Path(p) for p in items(value["runtime_cri_sockets"])),
        containerd_socket=Path(containerd_socket) if containerd_socket else None,
        containerd_namespaces=items(value["runtime_containerd_namespaces"]),
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
