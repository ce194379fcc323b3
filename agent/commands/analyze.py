"""`schedwatch analyze FILE…`: the diagnosis of artifacts people already collected (perf trace -s, strace -c,
top, pidstat, mpstat, vmstat, time, perf stat, perf report/top/script, stacks, bcc and bpftrace output, py-spy dump,
/proc and cgroup files, the kernel's clock-source lines, or a saved `schedwatch diagnose --json` report), as a
terminal tree, JSON or an HTML page. All files given together describe one environment; a file that
cannot be read is listed as not read and the rest is analysed. What the files cannot tell and the user knows (its
CPUs, its pool workers) is given with --cpus and --workers."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.commands import SAVED, Command
from agent.commands.output import add_known_arguments, add_output_arguments, deliver, fail, made_now, told_of
from agent.commands.parser import CommandParser, Example

NAME = "analyze"


def add_arguments(parser: CommandParser) -> None:
    """The files to read, what the user knows that they do not say, and the output wanted."""
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="a saved output, a directory of them, or - (stdin)"
    )
    add_known_arguments(parser, "the machine")
    add_output_arguments(parser, "the diagnosis")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Read the files, diagnose them, and print (and write) the report."""
    from agent.diagnosis.inputs.artifacts import OfflineError, read_environment
    from agent.diagnosis.inputs.told import with_told
    from agent.diagnosis.render.html_page import diagnosis_page
    from agent.diagnosis.render.json_report import to_json
    from agent.diagnosis.render.text import make_console, render_text
    from agent.diagnosis.rules import diagnose

    try:
        facts = with_told(read_environment(args.files), told_of(args))
    except OfflineError as error:
        return fail(NAME, str(error))
    diagnosis = diagnose(facts)
    made = made_now(NAME)
    title = "schedwatch analyze " + " ".join(path.name for path in args.files)
    return deliver(
        NAME,
        args,
        page=lambda: diagnosis_page(diagnosis, title, made),
        document=lambda: to_json(diagnosis, made),
        draw=lambda: render_text(diagnosis, make_console(), title=title, made=made),
    )


COMMAND = Command(
    name=NAME,
    help="the cause and the fix, from outputs saved on the slow machine",
    description="Diagnose the outputs saved on one machine (perf trace -s, strace -c, top, pidstat, mpstat, "
    "vmstat, time, perf stat/report/script, stacks, py-spy, /proc and cgroup files, a saved diagnose --json): "
    "the cause of its CPU contention and the fix. Formats: docs/analyze.md.",
    add_arguments=add_arguments,
    run=run,
    examples=(
        Example("schedwatch analyze gcp_perf_trace_s.txt gcp_top.txt", "the files of one machine"),
        Example("schedwatch analyze saved/ --cpus 32 --workers 14", "a directory; the fix with its number"),
        Example("ssh gcp-vm top -b -n 1 | schedwatch analyze -", "what a remote top shows, from stdin"),
    ),
    section=SAVED,
)
