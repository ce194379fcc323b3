"""The flags diagnose, top and profile share: which workloads (--namespace, --pod, --container, --cgroup, --pid) and,
for the sampling commands, for how long (--duration)."""

from __future__ import annotations

import argparse

from agent.diagnosis.inputs.live.members import Filter

MIN_SECONDS = 1
MAX_SECONDS = 600


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
    parser.add_argument("--namespace", default="", help="only workloads of this Kubernetes namespace")
    parser.add_argument("--pod", default="", help="only workloads of this pod")
    parser.add_argument("--container", default="", help="only this container (its name, or 12+ characters of its id)")
    parser.add_argument("--cgroup", default="", help="only this cgroup path (and the cgroups below it)")
    parser.add_argument("--pid", type=pid_number, default=None, help="only the workload that holds this process")


def workload_filter(args: argparse.Namespace) -> Filter:
    """The workloads the filter flags of add_filter_arguments name."""
    return Filter(args.namespace, args.pod, args.container, args.cgroup, args.pid)
