"""`schedwatch run`: load every enabled collector that can run here and serve /metrics until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import signal
import ssl
import sys
import time

from agent import __version__, assembly, config, log, memory
from agent.collectors.common.limits import workload_map_size
from agent.commands import Command
from agent.commands.agent_flags import add_agent_arguments, settings_from
from agent.commands.diagnose import cgroup_tree
from agent.commands.parser import CommandParser, Example
from agent.diagnosis.inputs.processes import census
from agent.diagnosis.standing import StandingFindings, node_ticks
from agent.exporter import AgentCollector, build_registry
from agent.identity.placement import ProcessKeys
from agent.machine import kernel
from agent.machine.clocksource import read_clocksource
from agent.machine.cpus import online_cpu_count
from agent.machine.procfs import ProcFS
from agent.web import serve

STOP_POLL_SECONDS = 0.2  # how soon the agent notices SIGTERM or SIGINT
TRIM_SECONDS = 1.0  # at most this often, free heap pages go back to the kernel after a scrape


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Serve until stopped; 2 with a one-line error when the settings or the listening address are unusable."""
    return serve_metrics(settings_from(args, parser))


def serve_metrics(settings: config.Settings) -> int:
    """Load every enabled collector that can run here and serve /metrics until SIGTERM or SIGINT."""
    logger = log.get_logger("agent")
    memory.limit_arenas()
    try:
        tls, basic_auth = config.web_security(settings)
    except config.ConfigError as error:
        print(f"schedwatch: {error}", file=sys.stderr)
        return 2
    facts = assembly.prepare_machine(settings)
    logger.info(
        "starting",
        version=__version__,
        kernel=facts.release,
        headers=facts.headers.source if facts.headers else None,
        cgroup_root=str(facts.cgroup_root),
    )
    stats_fd = assembly.enable_stats(settings)
    identities = assembly.build_identities(settings)
    identities.start()
    context = assembly.build_context(settings, facts, identities)
    if not context.keys.per_process and facts.cgroup_root is None:
        logger.warning(
            "no_cgroup2_tree",
            consequence='every workload is labelled cgroup="(unresolved)"',
            fix="use --workloads-by auto (or process), or pass the host's tree with --cgroup-root",
        )
    started = assembly.start_collectors(settings, facts, context)
    memory.settle_heap()

    # The handler only records the signal: it may run again while it runs (a process group's SIGTERM and a
    # shell's trap arrive together), so it must take no lock; the main thread looks for it between naps.
    stop_signals: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _frame: stop_signals.append(received))
    findings = StandingFindings(
        online_cpu_count(),
        count_workers=census.counter(ProcFS(), cgroup_tree(settings.cgroup_root)),
        node_ticks=node_ticks(ProcFS()),
        clocksource=read_clocksource,
    )
    agent_collector = AgentCollector(
        started.running,
        started.reasons(),
        facts.release,
        lambda: stats_fd is not None or bool(kernel.bpf_stats_enabled()),
        identities,
        findings,
        mode=started.mode.mode,
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
        assembly.close_all(started.running.values(), stats_fd)
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
        collectors=sorted(started.running),
        unavailable=sorted(started.unavailable),
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
    assembly.close_all(started.running.values(), stats_fd)
    logger.info("stopped")
    return 0


def add_arguments(parser: CommandParser) -> None:
    """The agent's flags: the common ones in --help, every one in --help-all."""
    add_agent_arguments(parser, common_shown=True)


COMMAND = Command(
    name="run",
    help="the agent: count in the kernel, serve Prometheus metrics",
    description="Load every enabled collector that can run here and serve /metrics until SIGTERM or SIGINT.",
    add_arguments=add_arguments,
    run=run,
    examples=(
        Example("sudo schedwatch run", f"serve http://{config.DEFAULT_LISTEN}/metrics"),
        Example("sudo schedwatch run --listen 0.0.0.0:17953 --process-top-k 50", "per-process series too"),
        Example("make run ARGS='--mode perf'", "from a checkout: installs what it needs first"),
    ),
)
