"""`schedwatch diagnose`: sample the workloads for a while, name what slows them and how to fix it.

Three sources of the same series: the collectors loaded in this process (default; needs what `schedwatch run`
needs), a running agent (``--from http://HOST:PORT``), or a Prometheus server that scrapes the agents
(``--from prometheus+http://HOST:9090``: every node's workloads ranked, or one node's with ``--node``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.core import Metric

from agent import assembly, config, log
from agent.collectors import registry
from agent.commands import Command
from agent.commands.agent_flags import (
    add_client_arguments,
    add_collection_arguments,
    add_logging_arguments,
    client_from,
    refuse_given,
    refuse_groups,
    settings_from,
)
from agent.commands.output import made_now, print_json, to_stdout
from agent.commands.parser import CommandParser, Example
from agent.diagnosis.findings import Diagnosis
from agent.diagnosis.inputs.live import fetch
from agent.diagnosis.inputs.live.fleet import NodeWindow, PrometheusSource, is_prometheus
from agent.diagnosis.inputs.live.gather import NothingMatches, facts_from_window, ranked, sample_live
from agent.diagnosis.inputs.live.ranking import score, shares
from agent.diagnosis.inputs.live.sources import AgentSource, CollectedSource, Source, SourceError
from agent.diagnosis.inputs.live.window import workload_views
from agent.diagnosis.render.json_report import to_json
from agent.diagnosis.rules import diagnose
from agent.exporter import AgentCollector
from agent.identity.filter import Filter, NoSuchProcess, filter_for_pid
from agent.machine.cgroups.layout import workload_tree
from agent.machine.procfs import ProcFS

MIN_SECONDS = 1
MAX_SECONDS = 600
DEFAULT_SECONDS = 10
DEFAULT_FLEET_SECONDS = 300  # Prometheus scrapes every 15-60 s: increase() needs a few scrapes in its range
FLEET_SCHEMA = "schedwatch.fleet/v1"
FLEET_TOP = 20  # workloads listed in a fleet ranking
# A diagnosis is a one-off measurement: it counts system calls by family for its duration unless asked not to (an
# agent left running does not, for the price it would take from every system call of the node).
ON_BY_DEFAULT = ("syscall_families",)


def duration(text: str) -> int:
    """--duration: whole seconds within MIN_SECONDS..MAX_SECONDS."""
    try:
        seconds = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of seconds") from None
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{seconds} s is out of range: give {MIN_SECONDS} to {MAX_SECONDS} seconds")
    return seconds


def pid_number(text: str) -> int:
    """--pid: a positive process id."""
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a process id: give its number (pgrep -f NAME finds it)")
    return int(text)


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """--namespace, --pod, --container, --cgroup and --pid: which workloads (diagnose, profile and top)."""
    group = parser.add_argument_group("which workloads (default: every one)")
    group.add_argument("--namespace", default="", metavar="NS", help="only those of this Kubernetes namespace")
    group.add_argument("--pod", default="", metavar="NAME", help="only those of this pod")
    group.add_argument("--container", default="", metavar="NAME", help="only this container (name, or 12+ of its id)")
    group.add_argument("--cgroup", default="", metavar="PATH", help="only this cgroup (and the cgroups below it)")
    group.add_argument("--pid", type=pid_number, default=None, help="only the workload that holds this process")


def workload_filter(args: argparse.Namespace) -> Filter:
    """The workloads the filter flags of add_filter_arguments name."""
    return Filter(args.namespace, args.pod, args.container, args.cgroup, args.pid)


def add_arguments(parser: CommandParser) -> None:
    """What to diagnose, for how long, from where; the collection, runtime and logging flags (for the collectors
    diagnose loads itself) and the client flags of --from (TLS, basic auth) in --help-all."""
    how = parser.add_argument_group("for how long, from where")
    how.add_argument(
        "--duration",
        type=duration,
        default=None,
        metavar="S",
        help=f"seconds to sample ({MIN_SECONDS}-{MAX_SECONDS}; default {DEFAULT_SECONDS}; with a Prometheus, the "
        f"queries' range: default {DEFAULT_FLEET_SECONDS})",
    )
    how.add_argument(
        "--from",
        dest="source",
        default="",
        metavar="URL",
        help="read a running agent (http[s]://HOST:PORT) or a Prometheus (prometheus+http[s]://HOST:9090) instead "
        "of loading the collectors here (TLS, basic auth: --help-all)",
    )
    how.add_argument("--node", default="", help="with a Prometheus: the node (instance label) to diagnose")
    add_filter_arguments(parser)
    output = parser.add_argument_group("output (default: a tree on the terminal)")
    output.add_argument("--json", action="store_true", help="print the diagnosis as JSON (docs/schemas/)")
    add_collection_arguments(parser, ON_BY_DEFAULT)
    add_logging_arguments(parser)
    add_client_arguments(parser)
    refuse_groups(parser, (config.SERVING,), "diagnose serves nothing; it is `schedwatch run`'s flag")
    refuse_groups(
        parser, (config.EXPORT,), "it shapes what `schedwatch run` exports and keeps, which diagnose does not read"
    )


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
    loading = config.flags_of([config.COLLECTION, config.RUNTIME], list(registry()), ON_BY_DEFAULT)
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


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Diagnose and print; 0 when a diagnosis was printed, 2 with a one-line error otherwise."""
    settings = settings_from(args, parser, ON_BY_DEFAULT)
    client = source_client(args, parser)
    wanted = workload_filter(args)
    try:
        if args.node and not is_prometheus(args.source):
            raise SourceError("--node needs --from prometheus+http://HOST:9090 (a node's own agent is its node)")
        if is_prometheus(args.source):
            return _fleet(args, wanted, client)
        procfs = ProcFS()
        wanted = filter_for_pid(procfs, wanted)
        seconds = args.duration or DEFAULT_SECONDS
        tree = cgroup_tree(settings.cgroup_root)
        if args.source:
            facts = sample_live(AgentSource(args.source, client=client), seconds, wanted, procfs, tree)
        else:
            with loaded_collectors(settings) as source:
                facts = sample_live(source, seconds, wanted, procfs, tree)
    except (SourceError, NothingMatches, NoSuchProcess) as error:
        print(f"schedwatch diagnose: {error}", file=sys.stderr)
        return 2
    return print_diagnosis(diagnose(facts), args.json)


def cgroup_tree(cgroup_root: Path | None) -> Path | None:
    """The cgroup tree whose directories are the workloads (agent.machine.cgroups.layout.workload_tree)."""
    return workload_tree(cgroup_root)


@contextmanager
def loaded_collectors(settings: config.Settings) -> Iterator[Source]:
    """The collectors `schedwatch run` would load with these settings (--mode, with auto's fallback), as a source;
    SourceError when neither the syscalls nor the sched collector can run."""
    logger = log.get_logger("diagnose")
    machine = assembly.prepare_machine(settings)
    identities = assembly.build_identities(settings)
    identities.start()
    context = assembly.build_context(settings, machine, identities)
    started = assembly.start_collectors(settings, machine, context, quiet=True)
    try:
        if not {"syscalls", "sched"} & set(started.running):
            by_reason: dict[str, list[str]] = {}
            for name, availability in started.unavailable.items():
                reason = availability.reason + (f" (fix: {availability.fix})" if availability.fix else "")
                by_reason.setdefault(reason, []).append(name)
            reasons = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
            raise SourceError(
                f"no collector can count here in {started.mode.mode} mode ({reasons or 'none enabled'}); "
                "read a running agent instead: schedwatch diagnose --from http://127.0.0.1:17953"
            )
        for name, reason in started.reasons().items():
            logger.warning("collector_unavailable", collector=name, reason=reason)
        collector = AgentCollector(
            started.running, started.reasons(), machine.release, lambda: False, identities, mode=started.mode.mode
        )

        def collect() -> list[Metric]:
            return list(collector.collect())

        yield CollectedSource(collect, mode=started.mode.mode)
    finally:
        started.close()
        identities.stop()


def print_diagnosis(diagnosis: Diagnosis, as_json: bool) -> int:
    """The diagnosis as JSON, or as a tree on the terminal (plain text when piped); exit status 0."""
    made = made_now("diagnose")
    if as_json:
        return to_stdout(lambda: print_json(to_json(diagnosis, made)))
    title = f"schedwatch diagnose: {', '.join(diagnosis.facts.sources)}"
    from agent.diagnosis.render.text import make_console, render_text

    return to_stdout(lambda: render_text(diagnosis, make_console(), title=title, made=made))


def _fleet(args: argparse.Namespace, wanted: Filter, client: fetch.Client) -> int:
    """The Prometheus path: rank every node's workloads, or diagnose one node."""
    if wanted.pid is not None:
        raise SourceError("--pid names a process of this machine: run diagnose on its node, without a Prometheus")
    source = PrometheusSource(args.source, client=client)
    seconds = args.duration or DEFAULT_FLEET_SECONDS
    windows = source.node_windows(seconds, args.node or None)
    if args.node:
        if len(windows) != 1:
            names = ", ".join(window.instance for window in windows)
            raise SourceError(f"--node {args.node} names {len(windows)} instances ({names}): give the full instance")
        (window,) = windows
        name = f"{source.name} node {window.instance}"
        facts = facts_from_window(window.window, wanted, name, False, ProcFS(), None, None, 0.0, window.cpus)
        return print_diagnosis(diagnose(facts), args.json)
    ranking = fleet_ranking(windows, wanted, seconds)
    if args.json:
        return to_stdout(lambda: print_json(ranking))
    return to_stdout(lambda: print(fleet_text(ranking, args.source)))


def fleet_ranking(windows: list[NodeWindow], wanted: Filter, seconds: int) -> dict[str, Any]:
    """Every node's workloads matching *wanted*, ranked by contention score (JSON, schema FLEET_SCHEMA)."""
    rows: list[dict[str, Any]] = []
    for node in windows:
        for view in ranked(workload_views(node.window, node.cpus)):
            if not wanted.matches(view.ref):
                continue
            rows.append(
                {
                    "instance": node.instance,
                    "workload": {
                        "container_id": view.ref.container_id,
                        "container": view.ref.container,
                        "pod": view.ref.pod,
                        "namespace": view.ref.namespace,
                        "cgroup": view.ref.cgroup,
                    },
                    "name": view.ref.name,
                    "score": score(view),
                    "signals": shares(view),
                    "sched_yield_per_second": view.rate(view.sched_yield_calls),
                    "futex_per_second": view.rate(view.futex_total),
                    "runqueue_wait_per_second": view.rate(view.runqueue_wait_seconds),
                    "cpu_limit_cores": view.cpu_limit_cores,
                    "cpu_used_cores": view.cpu_used_cores,
                    "threads": view.threads,
                    "seconds": view.seconds,  # the part of the window the workload existed in: its rates' time
                }
            )
    rows.sort(key=lambda row: (-row["score"], row["instance"], row["name"]))
    return {
        "schema": FLEET_SCHEMA,
        "window_seconds": seconds,
        "nodes": [node.instance for node in windows],
        "workloads": rows[:FLEET_TOP],
        "next": "schedwatch diagnose --from <this Prometheus> --node INSTANCE for one node's findings; "
        "processes, libraries and thread variables need `schedwatch diagnose` on that node",
    }


def fleet_text(ranking: dict[str, Any], url: str) -> str:
    """The fleet ranking as plain text."""
    lines = [f"workloads of {len(ranking['nodes'])} nodes by contention over {ranking['window_seconds']} s:"]
    for row in ranking["workloads"]:
        strongest = max(row["signals"].items(), key=lambda item: item[1], default=("nothing", 0.0))
        covers = "" if row.get("seconds") is None else f", over {row['seconds']:.0f} s"
        lines.append(f"  {row['score']:7.2f}  {row['instance']}  {row['name']}  (strongest: {strongest[0]}{covers})")
    lines.append(f"next: schedwatch diagnose --from {url} --node INSTANCE")
    lines.append("processes, libraries and thread variables: run `schedwatch diagnose` on that node")
    return "\n".join(lines)


COMMAND = Command(
    name="diagnose",
    help="sample the workloads here: the cause of CPU contention, the fix",
    description="Sample the workloads for a while and name what slows them, with the evidence and the fix: from "
    "the collectors loaded here (as root), a running agent, or a Prometheus that scrapes the agents. "
    "docs/diagnosis.md.",
    add_arguments=add_arguments,
    examples=(
        Example("sudo schedwatch diagnose", "10 s of every workload here"),
        Example("sudo schedwatch diagnose --pod pipeline-0 --duration 30", "one pod, for 30 s"),
        Example("schedwatch diagnose --from prometheus+http://prometheus:9090", "every node's workloads, ranked"),
    ),
    run=run,
)
