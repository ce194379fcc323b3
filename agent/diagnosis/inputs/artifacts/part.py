"""What one saved artifact tells about its environment, before the files of one environment are merged."""

from __future__ import annotations

from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, WorkloadView

MACHINE_WIDE = "{tool} is machine-wide: its CPU shares include every process on the host, not only the workload"


@dataclass(frozen=True)
class Part:
    """The facts read from one file.

    *workload* is None when the tool tells nothing about the workload (mpstat, vmstat). *untimed_counts* is True
    when the workload's counts cover a window the tool does not print (perf trace -s, strace -c): merged with a
    timed source, the environment then has no window, since its counts would be divided by the wrong one.
    """

    kind: str  # the name of its format's row in .formats: "perf trace -s", "strace -c", "top", ...
    source: str
    node: NodeView
    workload: WorkloadView | None = None
    notes: tuple[str, ...] = ()
    untimed_counts: bool = False
