"""Capture the inputs of the /metrics end-to-end test from this host (root, BPF, a cgroup tree with a cpu controller).

    sudo .venv/bin/python -m tests.support.end_to_end_capture

Makes three cgroups under ``/schedwatch-golden`` (cgroup2 and, on a hybrid host, the v1 cpu and cpuset
hierarchies), runs workloads with known behaviour in them (tests/workloads), loads the real BPF programs, and
while the workloads are parked reads both probes once and copies the cgroups' files. Writes
tests/unit/fixtures/end-to-end/: ``probes.json`` (the probes' snapshots, cgroups by path instead of by id) and
``cgroup/`` (the files the cgroup_cpu collector reads, copied verbatim). Then regenerate the golden exposition:
``SCHEDWATCH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_end_to_end_metrics.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.bpf.probes.sched import SchedProbe
from agent.bpf.probes.syscalls import SyscallProbe
from agent.bpf.stats import enable_bpf_stats
from agent.collectors.common.limits import probe_limits
from agent.config import Settings
from agent.identity.placement import CgroupKeys
from agent.machine import kernel
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.cpus import online_cpu_count
from agent.machine.facts import gather
from tests.support.workloads import Workload, build

OUT = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "end-to-end"
BASE = "schedwatch-golden"
DOCKER = "docker-5b1b0e7f6c3a4d2e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e.scope"
POD = (
    "kubepods/burstable/pod6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9/"
    "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
)
BATCH = "batch"
# What the cgroup_cpu collector reads, per hierarchy (cgroup2 here has no cpu controller: v1 has it).
FILES = {
    "unified": ("cgroup.procs", "cgroup.threads", "cgroup.controllers", "cgroup.stat", "cpu.stat"),
    "cpu": ("cgroup.procs", "tasks", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.stat"),
    "cpuset": ("cgroup.procs", "tasks", "cpuset.cpus", "cpuset.effective_cpus"),
}
# (v1 cpu quota, period, cpuset) of each cgroup; the quota -1 is none.
CONTROLS = {DOCKER: (50_000, 100_000, "0"), POD: (-1, 100_000, "0-1"), BATCH: (150_000, 100_000, "0-1")}


def hierarchies() -> dict[str, Path]:
    facts = gather()
    assert facts.cgroup_root is not None, "no cgroup2 tree"
    found = {"unified": facts.cgroup_root}
    for controller in ("cpu", "cpuset"):
        assert controller in facts.cgroups.v1, f"this capture expects a hybrid host (no v1 {controller} hierarchy)"
        found[controller] = facts.cgroups.v1[controller]
    return found


@contextlib.contextmanager
def cgroups(roots: dict[str, Path]) -> Iterator[dict[str, str]]:
    """The three cgroups in every hierarchy, with their quotas and cpusets; {name: joinable dirs}."""
    made: list[Path] = []
    joined: dict[str, str] = {}
    try:
        for relative, (quota, period, cpus) in CONTROLS.items():
            dirs = []
            for hierarchy, root in roots.items():
                parts = f"{BASE}/{relative}".split("/")
                for depth in range(1, len(parts) + 1):
                    path = root.joinpath(*parts[:depth])
                    if not path.exists():
                        path.mkdir()
                        made.append(path)
                        if hierarchy == "cpuset":  # a v1 cpuset takes no task before it has CPUs and memory nodes
                            (path / "cpuset.mems").write_text((path.parent / "cpuset.mems").read_text())
                            (path / "cpuset.cpus").write_text((path.parent / "cpuset.cpus").read_text())
                dirs.append(str(path))
            (roots["cpu"] / BASE / relative / "cpu.cfs_period_us").write_text(f"{period}\n")
            (roots["cpu"] / BASE / relative / "cpu.cfs_quota_us").write_text(f"{quota}\n")
            (roots["cpuset"] / BASE / relative / "cpuset.cpus").write_text(f"{cpus}\n")
            joined[relative] = ":".join(dirs)
        yield joined
    finally:
        for path in reversed(made):
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def struct_fields(value: Any) -> dict[str, Any]:
    """A `cgroups` map value (a ctypes struct) as its fields by name: a number, or a list for an array."""
    return {
        name: list(getattr(value, name)) if isinstance(getattr(value, name), ctypes.Array) else getattr(value, name)
        for name, *_kind in value._fields_
    }


def snapshot_json(snapshot: Any, paths: dict[int, str]) -> dict[str, Any]:
    """A probe snapshot as JSON: the golden cgroups' entries by path, each its struct's fields by name; no
    per-process entries (the end-to-end test runs with the default --process-top-k 0, which exports none)."""
    return {
        "cgroups": {
            paths[key]: value for key, value in snapshot.cgroups.items() if paths.get(key, "").startswith(f"/{BASE}")
        },
        "health": dataclasses.asdict(snapshot.health),
    }


def copy_tree(roots: dict[str, Path], out: Path) -> None:
    for hierarchy, root in roots.items():
        for directory in [root, root / BASE, *sorted((root / BASE).rglob("*"))]:
            if not directory.is_dir():
                continue
            target = out / hierarchy / directory.relative_to(root)
            target.mkdir(parents=True, exist_ok=True)
            for name in FILES[hierarchy]:
                with contextlib.suppress(FileNotFoundError):
                    (target / name).write_bytes((directory / name).read_bytes())


def stat_value(path: Path, key: str) -> int:
    """One counter of a cgroup's `cpu.stat`."""
    return int(dict(line.split() for line in path.read_text().splitlines())[key])


def main() -> None:
    roots = hierarchies()
    tracefs = kernel.tracefs_root() or kernel.mount_tracefs()
    facts = gather()
    assert facts.headers is not None, facts.headers_error
    state = Path(tempfile.mkdtemp(prefix="schedwatch-capture-"))
    kernel.prepare_headers(facts.headers, state)
    stats_fd = enable_bpf_stats()
    resolver = CgroupPathResolver(roots["unified"])
    limits = probe_limits(Settings(), CgroupKeys(resolver))
    syscalls, sched = SyscallProbe(limits, tracefs, struct_fields), SchedProbe(limits, tracefs, struct_fields)
    workloads: list[Workload] = []
    try:
        with cgroups(roots) as dirs:
            workloads.append(Workload(build("spinner"), dirs[DOCKER], 2, 0.6, -1))
            workloads.append(Workload(build("yielder"), dirs[POD], 5000, 2))
            workloads.append(Workload(build("futexer"), dirs[POD], 20, 1_000_000, 10))
            workloads.append(Workload(build("sleeper"), dirs[BATCH], 20, 5_000_000))
            time.sleep(0.2)  # the parked threads' last switches are counted
            paths = resolver.snapshot()
            probes = {
                "kernel_release": facts.release,
                "online_cpus": online_cpu_count(),
                "syscalls": snapshot_json(syscalls.read(), paths),
                "sched": snapshot_json(sched.read(), paths),
                "programs": {
                    "syscalls": [dataclasses.asdict(p) for p in syscalls.program_stats()],
                    "sched": [dataclasses.asdict(p) for p in sched.program_stats()],
                },
                "truth": [w.truth for w in workloads],
            }
            throttled = stat_value(roots["cpu"] / BASE / DOCKER / "cpu.stat", "nr_throttled")
            assert throttled > 0, "the spinner was never throttled: CPU 0 was too busy; run again on a quiet machine"
            shutil.rmtree(OUT / "cgroup", ignore_errors=True)
            copy_tree(roots, OUT / "cgroup")
            for workload in workloads:
                workload.release()
            workloads.clear()
    finally:
        for workload in workloads:
            with contextlib.suppress(Exception):
                workload.release()
        syscalls.close()
        sched.close()
        os.close(stats_fd)
        shutil.rmtree(state, ignore_errors=True)
    (OUT / "probes.json").write_text(json.dumps(probes, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
