"""Which cgroup hierarchy the BPF-less sources walk, and the kernel behaviour they rely on there."""

from __future__ import annotations

from pathlib import Path

from agent.machine import kernel
from agent.machine.cgroups.layout import CgroupLayout

# perf cgroup events count the tasks of cgroups below theirs too, since the change that made perf_event an
# implicit cgroup2 controller (Linux 4.11); verified on 6.18. Before, an event counted its own cgroup only.
HIERARCHICAL_PERF_SINCE = (4, 11)


def perf_event_tree(layout: CgroupLayout) -> Path | None:
    """The hierarchy perf cgroup events are opened in: the v1 perf_event hierarchy if mounted, else cgroup2.

    On cgroup2 the perf_event controller is always on (it never shows in cgroup.controllers).
    """
    return layout.v1.get("perf_event") or layout.unified


def task_tree(layout: CgroupLayout) -> tuple[Path, str] | None:
    """The hierarchy whose directories list each workload's threads (the workload hierarchy), and the file listing
    them: cgroup.threads in cgroup2, tasks in v1."""
    hierarchy = layout.workload_hierarchy
    return None if hierarchy is None else (hierarchy.root, hierarchy.threads_file)


def perf_counts_hierarchically(release: str) -> bool:
    """Whether a perf cgroup event on this kernel also counts the cgroups below its own."""
    version = kernel.version_tuple(release)
    return not version or version[:2] >= HIERARCHICAL_PERF_SINCE


def parent_path(path: str) -> str | None:
    """'/a/b' -> '/a', '/a' -> '/', '/' -> None."""
    if path == "/":
        return None
    head = path.rsplit("/", 1)[0]
    return head or "/"
