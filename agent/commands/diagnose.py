"""`schedwatch diagnose`: sample the workloads for a while, name what slows them and how to fix it.

Three sources of the same series: the collectors loaded in this process (default; needs what `schedwatch run`
needs), a running agent (``--from http://HOST:PORT``), or a Prometheus server that scrapes the agents
(``--from prometheus+http://HOST:9090``: every node's workloads ranked, or one node's with ``--node``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent import assembly, config
from agent.commands import Command
from agent.commands.agent_flags import (
    add_client_arguments,
    add_collection_arguments,
    add_logging_arguments,
    refuse_groups,
    settings_from,
)
from agent.commands.output import made_now, print_json, to_stdout
from agent.commands.parser import CommandParser, Example
from agent.commands.sources import collected_source, source_client
from agent.commands.workload_flags import add_duration_argument, add_filter_arguments, workload_filter
from agent.diagnosis.findings import Diagnosis
from agent.diagnosis.inputs.live import fetch
from agent.diagnosis.inputs.live.fleet import NodeWindow, PrometheusSource, is_prometheus
from agent.diagnosis.inputs.live.gather import NothingMatches, facts_from_window, ranked, sample_live
from agent.diagnosis.inputs.live.ranking import score, shares
from agent.diagnosis.inputs.live.sources import AgentSource, SourceError
from agent.diagnosis.inputs.live.window import workload_views
from agent.diagnosis.render.json_report import to_json
from agent.diagnosis.rules import diagnose
from agent.identity.filter import Filter, NoSuchProcess, filter_for_pid
from agent.machine.cgroups.layout import workload_tree
from agent.machine.procfs import ProcFS

DEFAULT_SECONDS = 10
DEFAULT_FLEET_SECONDS = 300  # Prometheus scrapes every 15-60 s: increase() needs a few scrapes in its range
FLEET_SCHEMA = "schedwatch.fleet/v1"
FLEET_TOP = 20  # workloads listed in a fleet ranking
# A diagnosis is a one-off measurement: it counts system calls by family for its duration unless asked not to (an
# agent left running does not, for the price it would take from every system call of the node).
ON_BY_DEFAULT = ("syscall_families",)


def add_arguments(parser: CommandParser) -> None:
    """What to diagnose, for how long, from where; the collection, runtime and logging flags (for the collectors
    diagnose loads itself) and the client flags of --from (TLS, basic auth) in --help-all."""
    how = parser.add_argument_group("for how long, from where")
    add_duration_argument(
        how, None, f"{DEFAULT_SECONDS}; with a Prometheus, the queries' range: default {DEFAULT_FLEET_SECONDS}"
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
        tree = workload_tree(settings.cgroup_root)
        if args.source:
            facts = sample_live(AgentSource(args.source, client=client), seconds, wanted, procfs, tree)
        else:
            with assembly.open_agent(settings, quiet=True) as agent:
                facts = sample_live(collected_source(agent), seconds, wanted, procfs, tree)
    except (SourceError, NothingMatches, NoSuchProcess) as error:
        print(f"schedwatch diagnose: {error}", file=sys.stderr)
        return 2
    return print_diagnosis(diagnose(facts), args.json)


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
