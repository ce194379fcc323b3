"""What the cgroup collectors (cgroup_cpu, cgroup_memory) need of the machine: a tree whose directories are the
workloads, and their controller in some hierarchy."""

from __future__ import annotations

from pathlib import Path

from agent.collectors import Availability
from agent.machine.cgroups.files import v2_controllers
from agent.machine.facts import MachineFacts


def workload_tree(facts: MachineFacts) -> Path | None:
    """The hierarchy whose directories are the workloads: cgroup2, or on hosts without it the v1 workload hierarchy."""
    return facts.cgroup_root if facts.cgroup_root is not None else facts.cgroups.workload_tree


def controller_availability(facts: MachineFacts, controller: str) -> Availability:
    """Whether a workload tree is visible and *controller* ("cpu", "memory") is enabled in some hierarchy; if not,
    why and the fix."""
    tree = workload_tree(facts)
    if tree is None or not (tree / "cgroup.procs").exists():
        return Availability(
            False,
            "no cgroup tree is visible (neither cgroup2 nor a v1 hierarchy)",
            "mount the cgroup hierarchies (in a container: the host's /sys/fs/cgroup) and pass --cgroup-root",
        )
    if controller not in facts.cgroups.v1 and controller not in v2_controllers(tree):
        return Availability(
            False,
            f"no {controller} controller in any cgroup hierarchy",
            f"enable it: echo +{controller} > <cgroup2 root>/cgroup.subtree_control",
        )
    return Availability(True)
