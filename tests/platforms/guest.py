"""Inside a platform VM: lay out the cgroups as asked, then run the selected kernel tests with pytest.

``python -m tests.platforms.guest --layout v2|v1 --modules DIR --results DIR -- PYTEST_ARGS``

Writes into the results directory (shared with the host): ``machine.json`` (kernel, preemption model, cgroup
layout as the guest sees it), ``junit.xml`` and ``pytest.log`` (pytest's own), and ``exit_code``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.platforms.machines import pytest_command

CGROUP_ROOT = Path("/sys/fs/cgroup")
BASETEMP = Path("/tmp/schedwatch-platform")  # in the guest's own memory: tests make sockets and cgroups' files there
LOG_COPY_SECONDS = 20.0
# The v1 hierarchies as CentOS 7's systemd and Docker CE's cgroupfs driver mount them (with cpu and cpuacct
# linked to their joint hierarchy, as there).
V1_HIERARCHIES = (
    "cpu,cpuacct",
    "memory",
    "pids",
    "blkio",
    "devices",
    "freezer",
    "net_cls,net_prio",
    "perf_event",
    "hugetlb",
    "cpuset",
)
V1_LINKS = {
    "cpu": "cpu,cpuacct",
    "cpuacct": "cpu,cpuacct",
    "net_cls": "net_cls,net_prio",
    "net_prio": "net_cls,net_prio",
}
V2_CONTROLLERS = ("cpu", "memory", "io", "pids")


def link_modules(modules: Path) -> None:
    """/lib/modules/RELEASE as the unpacked tree (its build/source links lead to the exact headers)."""
    release = os.uname().release
    link = Path("/lib/modules") / release
    if (link / "source" / "include").exists() or (link / "build" / "include").exists():
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(modules)


def v2_only() -> None:
    """cgroup2 alone at /sys/fs/cgroup (as the guest mounts it) with the cpu, memory, io and pids controllers
    handed to child cgroups, as systemd does on a current Kubernetes node."""
    controllers = (CGROUP_ROOT / "cgroup.controllers").read_text().split()
    missing = [name for name in V2_CONTROLLERS if name not in controllers]
    if missing:
        raise SystemExit(f"guest: cgroup2 at {CGROUP_ROOT} lacks the {' '.join(missing)} controllers")
    (CGROUP_ROOT / "cgroup.subtree_control").write_text(" ".join(f"+{name}" for name in V2_CONTROLLERS))


def v1_only() -> None:
    """No cgroup2; the v1 hierarchies under a tmpfs at /sys/fs/cgroup, plus name=systemd's own (CentOS 7)."""
    subprocess.run(["umount", str(CGROUP_ROOT)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "cgroup", str(CGROUP_ROOT)], check=True)
    for hierarchy in (*V1_HIERARCHIES, "systemd"):
        options = "none,name=systemd" if hierarchy == "systemd" else hierarchy
        (CGROUP_ROOT / hierarchy).mkdir()
        subprocess.run(["mount", "-t", "cgroup", "-o", options, "cgroup", str(CGROUP_ROOT / hierarchy)], check=True)
    for name, target in V1_LINKS.items():
        (CGROUP_ROOT / name).symlink_to(target)


def copy_logs(source: Path, target: Path, stop: threading.Event) -> None:
    """Copy the logs under *source* (the agents') to *target* every LOG_COPY_SECONDS and once more at *stop*: the
    host can read how far a slow guest got while it runs."""
    while True:
        stopped = stop.wait(LOG_COPY_SECONDS)
        for log in source.rglob("*.log"):
            copy = target / log.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, copy)
        if stopped:
            return


def describe() -> dict[str, object]:
    """What the tests ran on: the kernel, its preemption model and the cgroup mounts."""
    from agent.machine.cgroups.layout import read_layout

    layout = read_layout()
    realtime = Path("/sys/kernel/realtime")
    return {
        "release": os.uname().release,
        "version": os.uname().version,
        "preempt_rt": realtime.exists() and realtime.read_text().strip() == "1",
        "layout": layout.mode,
        "cgroup2": str(layout.unified) if layout.unified else None,
        "v1": sorted(layout.v1),
        "cpus": os.cpu_count(),
    }


def warm_bcc() -> dict[str, object]:
    """Import bcc once as the agent does (its bootstrap, unbounded), so that LLVM's libraries are read from the
    host's files over 9p before the agent's first import, bounded by 30 s, which a cold read under emulation on a busy
    host can exceed (the 6.12 machine's first run: its agent fell back to perf mode). How long it took, to the
    machine's record."""
    from agent.bpf.handover import BCC_BOOTSTRAP, PACKAGE_ROOT

    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", BCC_BOOTSTRAP, PACKAGE_ROOT], capture_output=True, text=True)
    seconds = round(time.monotonic() - started, 1)
    return {
        "bcc_first_import_seconds": seconds,
        "bcc_first_import_error": done.stderr[-500:] if done.returncode else "",
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tests.platforms.guest")
    parser.add_argument("--layout", choices=("v2", "v1"), required=True)
    parser.add_argument("--modules", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    results: Path = args.results
    link_modules(args.modules)
    v2_only() if args.layout == "v2" else v1_only()
    (results / "machine.json").write_text(json.dumps({**describe(), **warm_bcc()}, indent=1) + "\n")
    pytest_args = [a for a in args.pytest_args if a != "--"]
    stop = threading.Event()
    copier = threading.Thread(target=copy_logs, args=(BASETEMP, results / "logs", stop), daemon=True)
    copier.start()
    with (results / "pytest.log").open("w") as log:
        done = subprocess.run(
            pytest_command(pytest_args, results, BASETEMP), stdout=log, stderr=subprocess.STDOUT, check=False
        )
    stop.set()
    copier.join()
    (results / "exit_code").write_text(f"{done.returncode}\n")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
