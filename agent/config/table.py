"""The flag table: every flag of every command, declared once (name, group, help, default, converter); each command
takes the groups it reads (agent/commands/agent_flags.py), and docs/configuration.md lists them all."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from agent import log, metrics
from agent.config.flag import CLIENT, COLLECTION, EXPORT, LOGGING, RUNTIME, SERVING, Flag, collector_flag
from agent.config.values import (
    BYTES_PER_CGROUP,
    BYTES_PER_PROCESS,
    BYTES_PER_THREAD,
    BYTES_PER_TIMED_WORKLOAD,
    DEFAULT_LISTEN,
    DEFAULT_WEB_MAX_CONNECTIONS,
    DEFAULT_WEB_TIMEOUT,
    MAX_CGROUPS_LIMIT,
    MAX_CODE_TOP_K,
    MAX_CODE_WORKLOADS,
    MAX_PROCESSES_LIMIT,
    MAX_SAMPLE_FREQUENCY,
    MAX_THREADS_LIMIT,
    MAX_TIMED_WORKLOADS,
    MAX_WEB_CONNECTIONS_LIMIT,
    MODES,
    SYSCALL_TIME,
    WORKLOADS_BY,
    count,
    listen_address,
    optional_path,
    seconds,
)

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


FLAGS: tuple[Flag, ...] = (
    Flag(
        "--mode",
        COLLECTION,
        "where counts come from: bpf (programs in the kernel), perf (perf events and /proc schedstat), procfs (/proc "
        "and cgroup files); auto: the first of them that works here; docs/modes.md",
        "auto",
        choices=MODES,
        common=True,
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
        "per-process series for the K most active processes too (at most --max-processes; one more hash lookup "
        "per event in the kernel); 0: per workload only",
        0,
        _process_top_k,
        metavar="K",
        common=True,
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
        common=True,
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
    Flag(
        "--log-level",
        LOGGING,
        "the least severe log lines written (to stderr)",
        "info",
        choices=log.LEVELS,
        common=True,
    ),
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


def flags_of(
    groups: Sequence[str], collector_names: Sequence[str] = (), on_by_default: Collection[str] = ()
) -> list[Flag]:
    """The flags of *groups*, in declaration order; COLLECTION begins with one --collector.NAME per collector (those
    of OFF_BY_DEFAULT on by default only when in *on_by_default*)."""
    collectors = [collector_flag(name, on_by_default) for name in collector_names] if COLLECTION in groups else []
    return collectors + [flag for flag in FLAGS if flag.group in groups]
