"""Where diagnose and top read the series: a server given with --from (reached with the client flags), or the
collectors of an agent opened in this process."""

from __future__ import annotations

import argparse

from agent import assembly, config, log
from agent.collectors import registry
from agent.commands.agent_flags import client_from, refuse_given
from agent.diagnosis.inputs.live import fetch
from agent.diagnosis.inputs.live.fleet import is_prometheus
from agent.diagnosis.inputs.live.sources import CollectedSource, SourceError

READ_AN_AGENT = "read a running agent instead: schedwatch diagnose --from http://127.0.0.1:17953"


def source_client(args: argparse.Namespace, parser: argparse.ArgumentParser) -> fetch.Client:
    """How to reach the --from server; a one-line usage error for a flag that would do nothing with this --from
    (collection flags beside --from, client flags without it) or a client file that cannot be used."""
    client_flags = config.flags_of([config.CLIENT])
    if not args.source:
        refuse_given(args, parser, client_flags, "without --from", "add --from https://HOST:PORT")
        return fetch.Client()  # their variables serve another command: not even read
    if args.source.startswith(("http://", "prometheus+http://")):
        tls_flags = [flag for flag in client_flags if flag.name.startswith("--from.tls-")]
        refuse_given(args, parser, tls_flags, "with an http:// --from", "use https://")
    # A local agent's cgroups are read for details, from --cgroup-root; nothing else here measures.
    keep = () if is_prometheus(args.source) else ("--cgroup-root",)
    loading = config.flags_of([config.COLLECTION, config.RUNTIME], list(registry()))
    refuse_given(
        args,
        parser,
        [flag for flag in loading if flag.name not in keep],
        "with --from (the agent measured with its own flags)",
        "to measure in this process instead, drop --from",
    )
    settings = client_from(args, parser)
    tls = args.source.startswith(("https://", "prometheus+https://"))  # else TLS variables have nothing to do
    try:
        return fetch.make_client(
            settings.tls_ca_file if tls else None,
            settings.tls_cert_file if tls else None,
            settings.tls_key_file if tls else None,
            settings.tls_server_name if tls else "",
            settings.basic_auth_user,
            settings.basic_auth_password_file,
        )
    except fetch.ClientError as error:
        parser.error(str(error))


def collected_source(agent: assembly.Agent) -> CollectedSource:
    """The collectors of *agent* as a source of series, named by its mode (and the collectors BPF does not serve
    there); SourceError when neither the syscalls nor the sched collector runs. Each collector that does not run is
    logged as a warning."""
    problem = agent.counting_problem()
    if problem is not None:
        raise SourceError(f"{problem}; {READ_AN_AGENT}")
    logger = log.get_logger("diagnose")
    for name, reason in agent.started.reasons().items():
        logger.warning("collector_unavailable", collector=name, reason=reason)
    exporter = agent.exporter()
    degraded = sorted(agent.started.degraded)
    mode = agent.mode + (f"; without BPF: {', '.join(degraded)}" if degraded and agent.mode == "bpf" else "")
    return CollectedSource(lambda: list(exporter.collect()), mode=mode)
