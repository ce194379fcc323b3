"""The `schedwatch` command: `run` serves metrics, `check` says what this machine allows."""

from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from agent import __version__, config, log, memory
from agent.bpf import BpfUnavailable
from agent.bpf.stats import enable_bpf_stats
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory, modes, registry
from agent.collectors.common import workload_map_size
from agent.commands import analyze, compare, diagnose, verify
from agent.counters import SourceUnavailable
from agent.diagnosis.standing import StandingFindings
from agent.exporter import AgentCollector, build_registry
from agent.identity.placement import CgroupKeys, KeySpace, ProcessKeys
from agent.identity.resolver import IdentityResolver
from agent.identity.runtimes import RuntimeClient, socket_absent
from agent.identity.runtimes.containerd import ContainerdClient
from agent.identity.runtimes.cri import CriClient
from agent.identity.runtimes.docker import DockerClient
from agent.machine import kernel, taskstats
from agent.machine.cgroups import CgroupPathResolver
from agent.machine.cpus import online_cpu_count
from agent.machine.facts import MachineFacts, gather
from agent.web import serve

STOP_POLL_SECONDS = 0.2  # how soon the agent notices SIGTERM or SIGINT
TRIM_SECONDS = 1.0  # at most this often, free heap pages go back to the kernel after a scrape


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `schedwatch` console script."""
    factories = registry()
    names = list(factories)
    parser = config.ArgumentParser(prog="schedwatch", description=__doc__)
    parser.add_argument("--version", action="version", version=f"schedwatch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="load the probes and serve Prometheus metrics")
    config.add_arguments(run_parser, names)
    check_parser = commands.add_parser("check", help="report what this machine allows and which collectors can run")
    config.add_arguments(check_parser, names)
    check_parser.add_argument("--format", choices=("text", "json"), default="text")
    check_parser.add_argument(
        "--no-load", action="store_true", help="only inspect the machine; do not compile and load the probes"
    )
    analyze.add_parser(commands)
    compare.add_parser(commands)
    diagnose_parser = diagnose.add_parser(commands, names)
    verify.add_parser(commands)
    args = parser.parse_args(argv)
    if (handler := getattr(args, "handler", None)) is not None:
        return int(handler(args))
    try:
        settings = config.from_args(args, names)
    except config.ConfigError as error:
        {"run": run_parser, "check": check_parser, "diagnose": diagnose_parser}[args.command].error(str(error))
    log.configure(settings.log_level, settings.log_format)
    if args.command == "run":
        return run(settings)
    if args.command == "diagnose":
        return diagnose.run(args, settings, _prepare_machine, build_identities, build_context)
    try:
        return check(settings, args.format, load=not args.no_load)
    except BrokenPipeError:  # `schedwatch check | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _prepare_machine(settings: config.Settings) -> MachineFacts:
    """Gather facts, mounting tracefs and laying out kernel headers for bcc where needed."""
    logger = log.get_logger("machine")
    if kernel.tracefs_root() is None:
        try:
            root = kernel.mount_tracefs()
            logger.info("tracefs_mounted", path=str(root))
        except OSError as error:
            logger.warning("tracefs_unavailable", error=str(error))
    facts = gather(settings.cgroup_root)
    if facts.headers is not None:
        try:
            prepared = kernel.prepare_headers(facts.headers, settings.state_dir)
        except OSError as error:
            return replace(
                facts,
                headers=None,
                headers_error=f"cannot prepare headers in {settings.state_dir}: {error}; pass a writable --state-dir",
            )
        facts = replace(facts, headers=prepared)
    return facts


def run(settings: config.Settings) -> int:
    """Load every enabled collector that can run here and serve /metrics until SIGTERM or SIGINT."""
    logger = log.get_logger("agent")
    memory.limit_arenas()
    try:
        tls, basic_auth = config.web_security(settings)
    except config.ConfigError as error:
        print(f"schedwatch: {error}", file=sys.stderr)
        return 2
    facts = _prepare_machine(settings)
    logger.info(
        "starting",
        version=__version__,
        kernel=facts.release,
        headers=facts.headers.source if facts.headers else None,
        cgroup_root=str(facts.cgroup_root),
    )
    stats_fd = _enable_bpf_stats(settings, logger)
    identities = build_identities(settings)
    identities.start()
    context = build_context(settings, facts, identities)
    if not context.keys.per_process and facts.cgroup_root is None:
        logger.warning(
            "no_cgroup2_tree",
            consequence='every workload is labelled cgroup="(unresolved)"',
            fix="use --workloads-by auto (or process), or pass the host's tree with --cgroup-root",
        )
    mode, running, unavailable = start_collectors(settings, facts, context, logger)
    memory.settle_heap()

    # The handler only records the signal: it may run again while it runs (a process group's SIGTERM and a
    # shell's trap arrive together), so it must take no lock; the main thread looks for it between naps.
    stop_signals: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _frame: stop_signals.append(received))
    findings = StandingFindings(online_cpu_count())
    agent_collector = AgentCollector(
        running,
        unavailable,
        facts.release,
        lambda: stats_fd is not None or bool(kernel.bpf_stats_enabled()),
        identities,
        findings,
        mode=mode.mode,
        cgroup_paths=context.resolver,
    )
    try:
        server = serve(
            build_registry(agent_collector),
            settings.listen_host,
            settings.listen_port,
            max_connections=settings.web_max_connections,
            timeout=settings.web_timeout,
            tls=tls,
            auth=basic_auth,
        )
    except (OSError, ssl.SSLError) as error:
        _close_all(running, stats_fd)
        reason = error.strerror or str(error)
        print(
            f"schedwatch: cannot listen on {settings.listen_host}:{settings.listen_port}: "
            f"{reason}; choose another --listen, or check the TLS files",
            file=sys.stderr,
        )
        return 2
    logger.info(
        "listening",
        address=f"{settings.listen_host}:{server.port}",
        tls=tls is not None,
        max_connections=settings.web_max_connections,
        web_timeout=settings.web_timeout,
        collectors=sorted(running),
        unavailable=sorted(unavailable),
        workloads_by="process" if context.keys.per_process else "cgroup",
    )
    # Keyed by process, an exited process holds its kernel entry until a scrape folds it in: in a fork storm,
    # fold between scrapes once a quarter of the map may have filled with new processes (two programs announce each).
    keys = context.keys
    fold_after = workload_map_size(settings, per_process=True) // 2 if isinstance(keys, ProcessKeys) else 0
    trimmed_at, trimmed_after = time.monotonic(), 0
    while not stop_signals:
        time.sleep(STOP_POLL_SECONDS)
        if isinstance(keys, ProcessKeys) and keys.announced_since_sync() >= fold_after:
            agent_collector.collect_unserved()
        findings.evaluate_pending()  # the rules run here, between scrapes, not in the scrape that handed them over
        # A scrape leaves megabytes freed; hand them back off the scrape's path (a trim takes ~10 ms).
        if agent_collector.collections != trimmed_after and time.monotonic() - trimmed_at >= TRIM_SECONDS:
            trimmed_after = agent_collector.collections
            memory.release_free_memory()
            trimmed_at = time.monotonic()
    logger.info("stopping")
    server.stop()
    identities.stop()
    _close_all(running, stats_fd)
    logger.info("stopped")
    return 0


def start_collectors(
    settings: config.Settings, facts: MachineFacts, context: CollectorContext, logger: Any
) -> tuple[modes.ModeChoice, dict[str, Collector], dict[str, str]]:
    """Choose the mode (--mode) and start its enabled collectors; auto falls back when BPF fails to load."""
    mode = modes.choose(settings.mode, facts)
    running, unavailable, bpf_error = _start_mode(mode.mode, settings, facts, context, logger)
    if settings.mode == "auto" and mode.mode == modes.BPF and bpf_error is not None:
        _close_all(running, None)
        mode = modes.choose(settings.mode, facts, bpf_error=bpf_error)
        running, unavailable, _ = _start_mode(mode.mode, settings, facts, context, logger)
    log_method = logger.info if mode.mode == modes.BPF else logger.warning
    log_method("mode", mode=mode.mode, reason=mode.reason, missing=list(mode.missing), fix=mode.fix)
    return mode, running, unavailable


def _enabled(mode: str, settings: config.Settings) -> list[CollectorFactory]:
    """The collectors of *mode* that the settings leave on."""
    return [factory for factory in modes.factories(mode) if factory.name in settings.collectors]


def _start_mode(
    mode: str, settings: config.Settings, facts: MachineFacts, context: CollectorContext, logger: Any
) -> tuple[dict[str, Collector], dict[str, str], str | None]:
    """Start the enabled collectors of *mode*; the first BPF load error, if any."""
    running: dict[str, Collector] = {}
    unavailable: dict[str, str] = {}
    bpf_error = None
    for factory in _enabled(mode, settings):
        name = factory.name
        availability = factory.check(facts)
        if not availability.ok:
            unavailable[name] = availability.reason
            logger.error("collector_unavailable", collector=name, reason=availability.reason, fix=availability.fix)
            continue
        try:
            running[name] = factory.start(context)
            logger.info("collector_started", collector=name, mode=mode)
        except (BpfUnavailable, SourceUnavailable) as error:
            unavailable[name] = str(error)
            if isinstance(error, BpfUnavailable) and bpf_error is None:
                bpf_error = str(error)
            logger.error("collector_failed_to_start", collector=name, error=str(error))
    return running, unavailable, bpf_error


def build_context(settings: config.Settings, facts: MachineFacts, identities: IdentityResolver) -> CollectorContext:
    """What every collector gets: settings, facts, the cgroup2 tree, the workload key space, names."""
    resolver = CgroupPathResolver(facts.cgroup_root)
    return CollectorContext(settings, facts, resolver, workload_keys(settings, facts, resolver), identities)


def workload_keys(settings: config.Settings, facts: MachineFacts, resolver: CgroupPathResolver) -> KeySpace:
    """By cgroup2 id where a cgroup2 tree is visible (or asked for), else by process."""
    by_process = settings.workloads_by == "process" or (settings.workloads_by == "auto" and facts.cgroup_root is None)
    if by_process:
        return ProcessKeys(facts.cgroups, workload_map_size(settings, per_process=True))
    return CgroupKeys(resolver)


def build_identities(settings: config.Settings) -> IdentityResolver:
    """The runtime clients the settings name, behind a background resolver."""
    clients: list[RuntimeClient] = [
        DockerClient(path, settings.runtime_timeout, name="podman" if "podman" in str(path) else "docker")
        for path in settings.docker_sockets
        if path not in settings.kubelet_docker_sockets
    ]
    clients += [
        DockerClient(path, settings.runtime_timeout, name="kubelet-docker", kubelet=True)
        for path in settings.kubelet_docker_sockets
    ]
    clients += [CriClient(path, settings.runtime_timeout) for path in settings.cri_sockets]
    if settings.containerd_socket is not None:
        clients.append(
            ContainerdClient(settings.containerd_socket, settings.containerd_namespaces, settings.runtime_timeout)
        )
    return IdentityResolver(clients)


def _enable_bpf_stats(settings: config.Settings, logger: Any) -> int | None:
    if not settings.bpf_stats:
        return None
    try:
        return enable_bpf_stats()
    except BpfUnavailable as error:
        logger.warning("bpf_stats_unavailable", error=str(error))
        return None


def _close_all(running: dict[str, Collector], stats_fd: int | None) -> None:
    for collector in running.values():
        collector.close()
    if stats_fd is not None:
        os.close(stats_fd)


def check(settings: config.Settings, fmt: str, load: bool) -> int:
    """Print what this machine allows; exit 1 when an enabled collector cannot run.

    In auto and bpf modes the collectors judged are the BPF ones (exit 1 when BPF cannot run, whatever auto falls
    back to); in perf and procfs modes, that mode's own.
    """
    facts = _prepare_machine(settings)
    context = build_context(settings, facts, IdentityResolver([]))
    judged = modes.BPF if settings.mode in ("auto", modes.BPF) else settings.mode
    results, bpf_error = _check_collectors(judged, settings, facts, context, load)
    mode = modes.choose(settings.mode, facts, bpf_error=bpf_error if judged == modes.BPF else None)
    fallback = _check_collectors(mode.mode, settings, facts, context, load)[0] if mode.mode != judged else {}
    runtimes = _runtime_sockets(settings)
    if fmt == "json":
        report = _report_dict(facts, results, context.keys)
        report["runtimes"] = runtimes
        report["mode"] = asdict(mode) | {"requested": settings.mode}
        report["mode_collectors"] = {name: asdict(result) for name, result in fallback.items()}
        print(json.dumps(report, indent=2, default=str))
    else:
        # The mode goes with the machine's facts, before the collectors block (which stays last).
        head, block, collectors = _report_text(facts, results, runtimes, context.keys).partition("\ncollectors\n")
        print(f"{head}\n{_mode_text(settings.mode, mode, fallback)}{block}{collectors}")
    return 0 if all(result.ok for result in results.values()) else 1


def _check_collectors(
    mode: str, settings: config.Settings, facts: MachineFacts, context: CollectorContext, load: bool
) -> tuple[dict[str, Availability], str | None]:
    """Each enabled collector of *mode*: can it run (started and closed at once when *load*)? The BPF load error."""
    results: dict[str, Availability] = {}
    bpf_error = None
    for factory in _enabled(mode, settings):
        name = factory.name
        availability = factory.check(facts)
        if availability.ok and load:
            try:
                factory.start(context).close()
            except BpfUnavailable as error:
                bpf_error = bpf_error or str(error)
                availability = Availability(
                    False, str(error), "if other headers do not help, report it with `schedwatch check --format json`"
                )
            except SourceUnavailable as error:
                availability = Availability(
                    False, str(error), "give it CAP_PERFMON (or run as root), or use --mode procfs (docs/modes.md)"
                )
        results[name] = availability
    return results, bpf_error


def _mode_text(requested: str, mode: modes.ModeChoice, fallback: dict[str, Availability]) -> str:
    lines = [f"  mode         {mode.mode} (--mode {requested}): {mode.reason}"]
    lines += [f"  mode lacks   {what}" for what in mode.missing]
    if mode.fix:
        lines.append(f"  mode fix     {mode.fix}")
    factories = {factory.name: factory for factory in modes.factories(mode.mode)}
    for name, result in fallback.items():
        if result.ok:
            lines.append(f"  mode runs    {name} ok: {factories[name].description}")
        else:
            lines.append(f"  mode runs    {name} CANNOT RUN: {result.reason} — fix: {result.fix}")
    return "\n".join(lines)


def _runtime_sockets(settings: config.Settings) -> dict[str, str]:
    """Each configured runtime socket: 'listening', 'missing' or why it cannot be reached."""
    import socket

    sockets = list(dict.fromkeys([*settings.docker_sockets, *settings.kubelet_docker_sockets, *settings.cri_sockets]))
    if settings.containerd_socket and settings.containerd_socket not in sockets:
        sockets.append(settings.containerd_socket)
    states = {}
    for path in sockets:
        if socket_absent(path):
            states[str(path)] = "missing (containers are labelled by id only)"
            continue
        with socket.socket(socket.AF_UNIX) as probe:
            probe.settimeout(settings.runtime_timeout)
            try:
                probe.connect(str(path))
                states[str(path)] = "listening"
            except PermissionError:
                states[str(path)] = (
                    "not reachable: permission denied (without CAP_DAC_OVERRIDE the agent needs search permission on "
                    f"each directory above the socket: chmod o+x {path.parent}, or mount the socket file itself)"
                )
            except OSError as error:
                states[str(path)] = f"not reachable: {error.strerror or error}"
    return states


def _report_dict(facts: MachineFacts, results: dict[str, Availability], keys: KeySpace) -> dict[str, Any]:
    report = asdict(facts)
    report["cgroups"] = {"mode": facts.cgroups.mode, "unified": facts.cgroups.unified, "v1": facts.cgroups.v1}
    report["workloads_by"] = "process" if keys.per_process else "cgroup"
    report["collectors"] = {name: asdict(result) for name, result in results.items()}
    return report


def _yes(flag: bool | None) -> str:
    return {True: "yes", False: "no", None: "unknown"}[flag]


def _report_text(
    facts: MachineFacts, results: dict[str, Availability], runtimes: dict[str, str], keys: KeySpace
) -> str:
    caps = ", ".join(f"{name} {_yes(value)}" for name, value in facts.capabilities.items())
    if facts.headers is None:
        headers = f"MISSING: {facts.headers_error}"
    else:
        headers = f"{facts.headers.source}: {facts.headers.path} ({facts.headers.detail})"
    layout = facts.cgroups
    cgroups = f"{layout.mode}; cgroup2 at {layout.unified or 'not mounted'}"
    if layout.v1:
        cgroups += f"; v1 controllers {', '.join(sorted(layout.v1))}"
    if keys.per_process:
        workloads = "by process, placed by /proc/PID/cgroup" + (
            " (no cgroup2 tree here)" if facts.cgroup_root is None else " (asked for with --workloads-by)"
        )
    elif facts.cgroup_root is None:
        workloads = (
            'by cgroup2 id, but no cgroup2 tree is visible: every workload would be "(unresolved)" — '
            "use --workloads-by auto (or process), or pass the host's tree with --cgroup-root"
        )
    else:
        workloads = "by cgroup2 id, placed in the cgroup2 tree"
    if facts.bpf_stats:
        stats = "on"
    else:
        stats = (
            "off — for schedwatch_bpf_program_* numbers run with --bpf-stats (needs CAP_SYS_ADMIN) "
            "or sysctl -w kernel.bpf_stats_enabled=1"
        )
    futex2 = [
        event
        for event in ("futex_waitv", "futex_wait", "futex_wake", "futex_requeue")
        if kernel.has_tracepoint("syscalls", f"sys_enter_{event}", facts.tracefs)
    ]
    mask = kernel.sched_switch_blocked_mask(facts.tracefs)
    prev_state = (
        f"blocked when prev_state & {mask:#x} (read from the tracepoint format)"
        if mask is not None
        else "format unreadable: assuming prev_state & 0xff means blocked (Linux >= 4.14)"
    )
    delayacct = {
        True: "on",
        False: "off (sysctl -w kernel.task_delayacct=1 to cross-check run-queue wait)",
        None: "not in this kernel",
    }[taskstats.delay_accounting_enabled()]
    lines = [
        f"schedwatch {__version__} check",
        f"  kernel       {facts.release} (BTF {_yes(facts.btf)})",
        f"  privileges   {caps}",
        f"  tracefs      {facts.tracefs or 'NOT MOUNTED: mount -t tracefs tracefs /sys/kernel/tracing'}",
        f"  headers      {headers}",
        f"  cgroups      {cgroups}",
        f"  workloads    {workloads}",
        f"  bpf stats    {stats}",
        f"  futex2       {', '.join(futex2) or 'none (futex(2) only)'}",
        f"  sched_switch {prev_state}",
        f"  delayacct    {delayacct}",
        *(f"  runtime      {path}: {state}" for path, state in runtimes.items()),
        "collectors",
    ]
    factories = registry()
    for name, result in results.items():
        if result.ok:
            lines.append(f"  {name:<12} ok    {factories[name].description}")
        else:
            lines.append(f"  {name:<12} CANNOT RUN: {result.reason} — fix: {result.fix}")
    return "\n".join(lines)
