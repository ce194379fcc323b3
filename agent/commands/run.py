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
from agent.commands.parser import CommandParser, Example
from agent.diagnosis.standing import StandingFindings
from agent.exporter import AgentCollector, build_registry
from agent.identity.placement import KeySpace, ProcessKeys
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
    with assembly.open_agent(settings) as agent:
        facts = agent.facts
        logger.info(
            "starting",
            version=__version__,
            kernel=facts.release,
            headers=facts.headers.source if facts.headers else None,
            cgroup_root=str(facts.cgroup_root),
        )
        memory.settle_heap()
        # The handler only records the signal: it may run again while it runs (a process group's SIGTERM and a
        # shell's trap arrive together), so it must take no lock; the main thread looks for it between naps.
        stop_signals: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda received, _frame: stop_signals.append(received))
        findings = agent.standing_findings()
        exporter = agent.exporter(findings)
        try:
            server = serve(
                build_registry(exporter),
                settings.listen_host,
                settings.listen_port,
                max_connections=settings.web_max_connections,
                timeout=settings.web_timeout,
                tls=tls,
                auth=basic_auth,
            )
        except (OSError, ssl.SSLError) as error:
            reason = error.strerror or str(error)
            print(
                f"schedwatch: cannot listen on {settings.listen_host}:{settings.listen_port}: "
                f"{reason}; choose another --listen, or check the TLS files",
                file=sys.stderr,
            )
            return 2
        started = agent.started
        logger.info(
            "listening",
            address=f"{settings.listen_host}:{server.port}",
            tls=tls is not None,
            max_connections=settings.web_max_connections,
            web_timeout=settings.web_timeout,
            collectors=sorted(started.running),
            unavailable=sorted(started.unavailable),
            degraded=sorted(started.degraded),
            workloads_by="process" if agent.context.keys.per_process else "cgroup",
        )
        keys = agent.context.keys
        # Keyed by process, an exited process holds its kernel entry until a scrape folds it in: in a fork storm,
        # fold between scrapes once a quarter of the map may have filled with new processes (two programs announce
        # each).
        fold_after = workload_map_size(settings, per_process=True) // 2 if isinstance(keys, ProcessKeys) else 0
        _serve_until_stopped(exporter, findings, keys, fold_after, stop_signals)
        logger.info("stopping")
        server.stop()
    logger.info("stopped")
    return 0


def _serve_until_stopped(
    exporter: AgentCollector, findings: StandingFindings, keys: KeySpace, fold_after: int, stop_signals: list[int]
) -> None:
    """Between scrapes, until a stop signal: fold exited processes (keyed by process, once *fold_after* new ones
    were announced), run the rules, give memory back."""
    trimmed_at, trimmed_after = time.monotonic(), 0
    while not stop_signals:
        time.sleep(STOP_POLL_SECONDS)
        if isinstance(keys, ProcessKeys) and keys.announced_since_sync() >= fold_after:
            exporter.collect_unserved()
        findings.evaluate_pending()  # the rules run here, between scrapes, not in the scrape that handed them over
        # A scrape leaves megabytes freed; hand them back off the scrape's path (a trim takes ~10 ms).
        if exporter.collections != trimmed_after and time.monotonic() - trimmed_at >= TRIM_SECONDS:
            trimmed_after = exporter.collections
            memory.release_free_memory()
            trimmed_at = time.monotonic()


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
