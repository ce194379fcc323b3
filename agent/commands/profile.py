"""`schedwatch profile`: the on-CPU samples of a workload over a window, as folded stacks (the text flame-graph tools
read) or as JSON.

The sampling program (bpf/oncpu.bpf.c) runs on a cpu-clock timer on every CPU for --duration seconds; each sample is
named by library and function (agent/symbols). A sample is its leaf alone: schedwatch walks no stacks, so the only
frames above a function are the ones that group it (workload, process, library), never guessed callers. One folded
line per workload, process, library and function: ``WORKLOAD;COMM;LIBRARY;FUNCTION COUNT``. docs/profile.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from agent import assembly, config
from agent.bpf import BpfUnavailable
from agent.bpf.probes.oncpu import OnCpuProbe, Sample
from agent.collectors import oncpu
from agent.collectors.common.limits import probe_limits
from agent.commands import Command
from agent.commands.agent_flags import add_collection_arguments, add_logging_arguments, refuse_groups, settings_from
from agent.commands.output import print_json
from agent.commands.parser import CommandParser, Example
from agent.commands.workload_flags import add_duration_argument, add_filter_arguments, workload_filter
from agent.diagnosis.facts import Workload
from agent.diagnosis.render.shared import workload_name
from agent.identity.filter import Filter, NoSuchProcess, filter_for_pid
from agent.identity.workload import workload_for_cgroup
from agent.machine.procfs import ProcFS, printable
from agent.symbols.symbolizer import Symbolizer

SCHEMA = "schedwatch.profile/v1"
DEFAULT_SECONDS = 10


@dataclass(frozen=True)
class ProfileRow:
    """Samples of one function of one process of one workload."""

    workload: Workload
    pid: int
    comm: str
    library: str
    version: str
    function: str
    mode: str
    samples: int


def add_arguments(parser: CommandParser) -> None:
    """How long, which workloads, JSON or folded; the collection flags (--sample-frequency, --cgroup-root, ...) in
    --help-all."""
    own = parser.add_argument_group("for how long, and how to print it")
    add_duration_argument(own, DEFAULT_SECONDS, str(DEFAULT_SECONDS))
    own.add_argument("--json", action="store_true", help="print the samples as JSON (docs/profile.md)")
    add_filter_arguments(parser)
    add_collection_arguments(parser)
    add_logging_arguments(parser)
    refuse_groups(parser, (config.SERVING,), "profile serves nothing; it is `schedwatch run`'s flag")
    refuse_groups(parser, (config.EXPORT,), "it shapes what `schedwatch run` exports, which profile does not read")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Sample, name and print; 0 when samples were printed, 2 with a one-line error otherwise."""
    settings = settings_from(args, parser)
    procfs = ProcFS()
    try:
        wanted = filter_for_pid(procfs, workload_filter(args))
        rows = sample(settings, args.duration, wanted, procfs)
    except (NoSuchProcess, BpfUnavailable) as error:
        print(f"schedwatch profile: {error}", file=sys.stderr)
        return 2
    if args.json:
        print_json(to_json(rows, args.duration, settings.sample_frequency))
    else:
        sys.stdout.write("".join(f"{line}\n" for line in folded(rows)))
    if not rows:
        print("schedwatch profile: no samples of the workloads asked for in the window", file=sys.stderr)
    return 0


def sample(settings: config.Settings, seconds: int, wanted: Filter, procfs: ProcFS) -> list[ProfileRow]:
    """Sample every CPU for *seconds*; the named samples of the workloads *wanted* asks for, busiest first."""
    with assembly.open_agent(settings, start=False) as agent:
        available = oncpu.check(agent.facts)
        if not available.ok:
            raise BpfUnavailable(f"cannot sample: {available.reason} (fix: {available.fix})")
        keys = agent.context.keys
        probe = OnCpuProbe(probe_limits(settings, keys), settings.sample_frequency)
        try:
            time.sleep(seconds)
            keys.sync()
            samples = probe.read().samples
        finally:
            probe.close()
        places = keys.place({item.workload for item in samples})
        refs = {
            key: Workload(*workload_for_cgroup(place.path, agent.identities).labels()) for key, place in places.items()
        }
        chosen = [item for item in samples if wanted.matches(refs[item.workload])]
        return name_samples(chosen, refs, Symbolizer(procfs, version_of=agent.context.library_version), procfs)


def name_samples(
    samples: list[Sample], refs: dict[int, Workload], symbolizer: Symbolizer, procfs: ProcFS
) -> list[ProfileRow]:
    """Samples named by library and function and summed per workload, process and function, busiest first."""
    symbolizer.next_round()
    counted: Counter[tuple[Workload, int, str, str, str, str]] = Counter()
    comms: dict[int, str] = {}
    for item in samples:
        code = symbolizer.kernel(item.address) if item.kernel else symbolizer.user(item.tgid, item.address)
        mode = "kernel" if item.kernel else "user"
        counted[(refs[item.workload], item.tgid, code.library, code.version, code.function, mode)] += item.count
        if item.tgid not in comms:
            comms[item.tgid] = printable(procfs.comm(item.tgid) or "(exited)")
    rows = [
        ProfileRow(ref, pid, comms[pid], library, version, function, mode, count)
        for (ref, pid, library, version, function, mode), count in counted.items()
    ]
    rows.sort(key=lambda row: (-row.samples, row.pid, row.library, row.function))
    return rows


def _frame(text: str) -> str:
    """A name as one folded frame: ';' separates frames, and the count follows the last space of the line."""
    return text.replace(";", ":").replace("\n", " ") or "?"


def folded(rows: list[ProfileRow]) -> list[str]:
    """``WORKLOAD;COMM;LIBRARY;FUNCTION COUNT`` lines, sorted (as flame-graph tools expect to merge them)."""
    lines = []
    for row in rows:
        frames = (workload_name(row.workload), f"{row.comm} ({row.pid})", row.library, row.function)
        lines.append(";".join(_frame(frame) for frame in frames) + f" {row.samples}")
    return sorted(lines)


def to_json(rows: list[ProfileRow], seconds: int, frequency: int) -> dict[str, Any]:
    """The samples as the JSON contract (docs/profile.md) has them."""
    workloads: dict[Workload, list[ProfileRow]] = {}
    for row in rows:
        workloads.setdefault(row.workload, []).append(row)
    return {
        "schema": SCHEMA,
        "duration_seconds": seconds,
        "frequency_hz": frequency,
        "samples": sum(row.samples for row in rows),
        "workloads": [
            {
                "workload": {
                    "container_id": ref.container_id,
                    "container": ref.container,
                    "pod": ref.pod,
                    "namespace": ref.namespace,
                    "cgroup": ref.cgroup,
                },
                "samples": sum(row.samples for row in workload_rows),
                "rows": [
                    {
                        "pid": row.pid,
                        "comm": row.comm,
                        "library": row.library,
                        "version": row.version or None,
                        "function": row.function,
                        "mode": row.mode,
                        "samples": row.samples,
                    }
                    for row in workload_rows
                ],
            }
            for ref, workload_rows in sorted(workloads.items(), key=lambda item: -sum(r.samples for r in item[1]))
        ],
    }


COMMAND = Command(
    name="profile",
    help="which functions run on the CPUs: folded stacks or JSON",
    description="Sample what runs on the CPUs for a while and name each sample by workload, process, library and "
    "function: folded stacks (one line per function and its count, what flame-graph tools read) or JSON. "
    "docs/profile.md.",
    add_arguments=add_arguments,
    run=run,
    examples=(
        Example("sudo schedwatch profile --cgroup /pool --duration 10", "one cgroup's functions, 10 s"),
        Example("sudo schedwatch profile --pid 4242 --json", "the workload holding pid 4242, as JSON"),
        Example("sudo schedwatch profile | scripts/flamegraph_svg.py > cpu.svg", "a flame graph, from a checkout"),
    ),
)
