"""Whose counters a v1 controller's cgroup (cpu, cpuacct, memory) holds on a host without cgroup2, where the
workloads are the directories of another hierarchy (systemd's named tree).

A cgroup is the counters of the workload directory at the same path (its mirror). One at a path the workload
hierarchy has no directory at (a runtime that keeps that controller's cgroups elsewhere, found through
/proc/PID/cgroup) is the workload's whose processes are in it, if they are one workload's only. One that several
workloads share (a systemd service without accounting sits in its slice's, which is its slice's own) is counted
under its own directory's workload, or under nobody's, never under each of theirs. The root's is the machine's.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path


def may_own(workload_root: Path, path: str, v1_path: str) -> bool:
    """Whether the v1 cgroup at *v1_path* may be the counters of the workload directory at *path* (see the module)."""
    if v1_path == "/":
        return False
    return v1_path == path or not (workload_root / v1_path.lstrip("/")).is_dir()


class Claims:
    """The workloads each v1 cgroup was matched to in one scrape; a cgroup is counted only if it has one."""

    def __init__(self) -> None:
        self._by_cgroup: dict[str, set[Hashable]] = {}

    def add(self, v1_path: str, workload: Hashable) -> None:
        """*workload* has a directory whose counters are the v1 cgroup at *v1_path* (may_own said so)."""
        self._by_cgroup.setdefault(v1_path, set()).add(workload)

    def sole(self, v1_path: str) -> bool:
        """Whether the v1 cgroup at *v1_path* was matched to exactly one workload."""
        return len(self._by_cgroup.get(v1_path, ())) == 1
