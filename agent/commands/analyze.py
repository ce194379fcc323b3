"""`schedwatch analyze FILE…`: the diagnosis of artifacts people already collected (perf trace -s, strace -c,
top, pidstat, mpstat, vmstat, time, perf stat, perf report/top/script, stacks, bcc and bpftrace output, py-spy dump,
/proc and cgroup files, the kernel's clock-source lines, or a saved `schedwatch diagnose --json` report), as a
terminal tree, JSON or an HTML page. All files given together describe one environment; a file that
cannot be read is listed as not read and the rest is analysed."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.commands import Command
from agent.commands.output import fail, print_json, to_stdout, write_page

NAME = "analyze"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The files to read and the output wanted."""
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="a saved output, or a directory of them")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON (schedwatch.diagnosis/v1)")
    parser.add_argument("--html", type=Path, metavar="OUT", help="also write a self-contained HTML report to OUT")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Read the files, diagnose them, and print (and write) the report."""
    from agent.diagnosis.inputs.artifacts import OfflineError, read_environment
    from agent.diagnosis.render.html_page import diagnosis_page
    from agent.diagnosis.render.json_report import to_json
    from agent.diagnosis.render.text import make_console, render_text
    from agent.diagnosis.rules import diagnose

    try:
        facts = read_environment(args.files)
    except OfflineError as error:
        return fail(NAME, str(error))
    diagnosis = diagnose(facts)
    title = "schedwatch analyze " + " ".join(path.name for path in args.files)
    if args.html is not None and (problem := write_page(args.html, diagnosis_page(diagnosis, title))):
        return fail(NAME, problem)
    if args.json:
        return to_stdout(lambda: print_json(to_json(diagnosis)))
    return to_stdout(lambda: render_text(diagnosis, make_console(), title=title))


COMMAND = Command(
    name=NAME,
    help="diagnose saved outputs of perf, strace, top, sysstat, vmstat, time, gdb, bcc, bpftrace, py-spy, /proc",
    description=__doc__,
    add_arguments=add_arguments,
    run=run,
)
