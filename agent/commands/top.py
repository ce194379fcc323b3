"""`schedwatch top`: a live view of where each workload's thread-seconds go, refreshed every --interval.

One row per workload: CPU used against its limit, system share and its top system-call families, waiting for a
CPU (by holder where the agent exports it), throttled, blocked, yields/s, futex/s, run-queue p99, threads against
the CPU limit and the active finding; with --processes, its most active processes under it. Keys sort by a column
(the key under the help line), q quits. When stdout is not a terminal, or with --once, it prints plain lines: one
table per interval, or one table and exits. Reads collectors loaded in this process (as diagnose does) or a
running agent (--from http://HOST:PORT). docs/top.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prometheus_client.core import Metric

from agent import assembly, config
from agent.commands import Command
from agent.commands.agent_flags import (
    add_client_arguments,
    add_collection_arguments,
    add_logging_arguments,
    refuse_groups,
    settings_from,
)
from agent.commands.parser import CommandParser, Example
from agent.commands.sources import collected_source, source_client
from agent.commands.workload_flags import add_filter_arguments, seconds_within, workload_filter
from agent.diagnosis.inputs.live.fleet import is_prometheus
from agent.diagnosis.inputs.live.sources import AgentSource, SourceError
from agent.diagnosis.standing import StandingFindings
from agent.identity.filter import Filter, NoSuchProcess, filter_for_pid
from agent.machine.procfs import ProcFS
from agent.series.reading import Reading
from agent.top.table import BY_KEY, BY_NAME, Column, Row, nested, process_rows, rows

PROCESSES_LOADED_HERE = 50  # --process-top-k of the collectors top loads itself for --processes

MIN_INTERVAL = 0.5
MAX_INTERVAL = 60.0
DEFAULT_INTERVAL = 2.0
Read = Callable[[], Reading]


def add_arguments(parser: CommandParser) -> None:
    """Refresh, sort, filters (as diagnose), the source; the flags of the collectors top loads itself in
    --help-all."""
    view = parser.add_argument_group("what it shows, how often")
    view.add_argument(
        "--interval",
        type=seconds_within(MIN_INTERVAL, MAX_INTERVAL),
        default=DEFAULT_INTERVAL,
        metavar="S",
        help=f"seconds between refreshes (default {DEFAULT_INTERVAL:g}; {MIN_INTERVAL:g}-{MAX_INTERVAL:g})",
    )
    view.add_argument(
        "--sort",
        choices=sorted(BY_NAME),
        default="cpu",
        metavar="COLUMN",
        help=f"the column to sort by: {', '.join(sorted(BY_NAME))} (default cpu)",
    )
    view.add_argument("--once", action="store_true", help="print one table (over one interval) and exit")
    view.add_argument(
        "--processes",
        action="store_true",
        help=f"each workload's most active processes under it ({PROCESSES_LOADED_HERE} loading the collectors "
        "here; an agent's --process-top-k)",
    )
    view.add_argument(
        "--from",
        dest="source",
        default="",
        metavar="URL",
        help="read a running agent (http[s]://HOST:PORT) instead of loading the collectors here",
    )
    add_filter_arguments(parser)
    add_collection_arguments(parser)
    add_logging_arguments(parser)
    add_client_arguments(parser)
    refuse_groups(parser, (config.SERVING,), "top serves nothing; it is `schedwatch run`'s flag")
    refuse_groups(parser, (config.EXPORT,), "it shapes what `schedwatch run` exports, which top does not read")


@contextmanager
def _reader(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Iterator[Read]:
    settings = settings_from(args, parser)
    client = source_client(args, parser)
    if is_prometheus(args.source):
        raise SourceError("top reads an agent, not a Prometheus: give --from http://HOST:PORT of one node's agent")
    if args.source:
        yield AgentSource(args.source, client=client).read
        return
    if args.processes:
        settings = dataclasses.replace(
            settings, process_top_k=PROCESSES_LOADED_HERE, max_processes=config.Settings.max_processes
        )
    with assembly.open_agent(settings, quiet=True) as agent:
        yield collected_source(agent).extended(judging(agent.standing_findings(every=0.0))).read


def judging(findings: StandingFindings) -> Callable[[list[Metric]], list[Metric]]:
    """What each collection of the collectors loaded here gets: the FINDING column's series, as a running agent
    exports it. No agent judges them, so each collection is judged at once, over the time since the one before (the
    first has none)."""

    def judged(families: list[Metric]) -> list[Metric]:
        findings.hand_over(families)
        findings.evaluate_pending()
        return [*families, findings.family()]

    return judged


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Show the table until q (terminal) or forever / once (plain lines); 2 with a one-line error."""
    try:
        wanted = filter_for_pid(ProcFS(), workload_filter(args))
        with _reader(args, parser) as read:
            title = f"schedwatch top: {args.source or 'collectors loaded here'}"
            table = _Table(wanted, args.processes)
            if args.once or not sys.stdout.isatty():
                return _plain(read, table, BY_NAME[args.sort], args.interval, title, args.once)
            return _live(read, table, BY_NAME[args.sort], args.interval, title)
    except (SourceError, NoSuchProcess) as error:
        print(f"schedwatch top: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


@dataclasses.dataclass(frozen=True)
class _Table:
    """Which rows to show: the workloads *wanted* matches, and their processes when asked."""

    wanted: Filter
    processes: bool

    def rows(self, before: Reading, after: Reading) -> tuple[list[Row], list[Row]]:
        shown = process_rows(before, after, self.wanted) if self.processes else []
        return rows(before, after, self.wanted), shown


def _plain(read: Read, table: _Table, by: Column, seconds: float, title: str, once: bool) -> int:
    from agent.top.screen import plain

    before = read()
    while True:
        time.sleep(seconds)
        after = read()
        print(plain(nested(*table.rows(before, after), by), by, title), flush=True)
        if once:
            return 0
        print(flush=True)
        before = after


def _live(read: Read, table: _Table, by: Column, seconds: float, title: str) -> int:
    from rich.console import Console
    from rich.live import Live

    from agent.top.keys import QUIT, Keys
    from agent.top.screen import rich_table

    before = read()
    shown: tuple[list[Row], list[Row]] = ([], [])
    console = Console()
    with Keys(sys.stdin.fileno()) as keys, Live(console=console, auto_refresh=False, screen=True) as live:
        live.update(f"{title}: first reading, next in {seconds:g} s", refresh=True)
        deadline = time.monotonic() + seconds
        while True:
            key = keys.wait(deadline - time.monotonic())
            if key in QUIT:
                return 0
            if key is not None:
                by = BY_KEY.get(key, by)
            else:
                after = read()
                shown = table.rows(before, after)
                before, deadline = after, time.monotonic() + seconds
            if shown[0]:
                live.update(rich_table(nested(*shown, by), by, title, console.width), refresh=True)


COMMAND = Command(
    name="top",
    help="a live table of each workload's CPU, waits, yields and finding",
    description="A live table of where each workload's thread-seconds go: CPU against its limit, system share, "
    "waiting for a CPU, throttled, blocked, yields/s, futex/s, threads and the finding; keys sort by a column, q "
    "quits. docs/top.md.",
    add_arguments=add_arguments,
    run=run,
    examples=(
        Example("sudo schedwatch top", "every workload here, every 2 s"),
        Example("sudo schedwatch top --cgroup /kubepods --sort yields", "one subtree, by yields/s"),
        Example("schedwatch top --from http://127.0.0.1:17953 --once", "one table from a running agent"),
    ),
)
