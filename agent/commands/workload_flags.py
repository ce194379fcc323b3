"""The flags diagnose, top and profile share: which workloads (--namespace, --pod, --container, --cgroup, --pid) and,
for the sampling commands, for how long (--duration)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from agent.identity.filter import Filter

MIN_SECONDS = 1
MAX_SECONDS = 600


def seconds_within(low: float, high: float, whole: bool = False) -> Callable[[str], float]:
    """An argparse type: a number of seconds within *low*..*high* (whole seconds when *whole*), else a one-line
    error that gives the range."""
    kind = "a whole number of seconds" if whole else "a number of seconds"

    def seconds(text: str) -> float:
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {kind}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} s is out of range: give {low:g} to {high:g} seconds")
        return value

    return seconds


duration = seconds_within(MIN_SECONDS, MAX_SECONDS, whole=True)  # --duration of diagnose and profile


def add_duration_argument(group: argparse._ActionsContainer, default: int | None, default_said: str) -> None:
    """--duration of a sampling command (diagnose, profile): whole seconds within MIN_SECONDS..MAX_SECONDS;
    *default_said* is what its help says of the default."""
    group.add_argument(
        "--duration",
        type=duration,
        default=default,
        metavar="S",
        help=f"seconds to sample ({MIN_SECONDS}-{MAX_SECONDS}; default {default_said})",
    )


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
