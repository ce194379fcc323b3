"""Which cgroup hierarchies are mounted (mountinfo, or a host's cgroup mount seen at a root), which of them names the
workloads, and where a process is in them (/proc/PID/cgroup).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent.machine.procfs import ProcFS

UNIFIED = ""  # cgroup2's name in /proc/PID/cgroup (its line is "0::PATH")
# v1 hierarchies whose directories name the workloads on hosts without cgroup2, best first: systemd's own tree names
# every service and scope (the cpu hierarchy only those with CPU accounting on); runtimes mirror their containers'
# paths in every hierarchy.
V1_PREFERENCE = ("name=systemd", "cpu", "cpuacct", "memory", "pids")
# Options of a v1 cgroup mount that name no hierarchy (CentOS 7 mounts name=systemd with xattr).
NOT_CONTROLLERS = ("rw", "ro", "clone_children", "xattr", "noprefix", "cpuset_v2_mode", "none")


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy: its name in /proc/PID/cgroup (UNIFIED for cgroup2) and its mount point."""

    name: str
    root: Path

    @property
    def threads_file(self) -> str:
        """The file listing a directory's threads: cgroup.threads in cgroup2, tasks in v1."""
        return "cgroup.threads" if self.name == UNIFIED else "tasks"


@dataclass(frozen=True)
class CgroupLayout:
    """Mounted cgroup hierarchies: the cgroup2 mount (if any) and v1 controllers by name."""

    unified: Path | None
    v1: dict[str, Path] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        """'v2' (unified only), 'hybrid' (v1 controllers plus cgroup2), 'v1', or 'none'."""
        if self.unified and self.v1:
            return "hybrid"
        if self.unified:
            return "v2"
        return "v1" if self.v1 else "none"

    @property
    def placing_order(self) -> tuple[str, ...]:
        """Hierarchy names to place a process by, best first: cgroup2 where mounted; else the mounted v1 hierarchies,
        V1_PREFERENCE first."""
        if self.unified is not None:
            return (UNIFIED,)
        preferred = [name for name in V1_PREFERENCE if name in self.v1]
        return (*preferred, *sorted(set(self.v1) - set(preferred)))

    @property
    def workload_hierarchy(self) -> Hierarchy | None:
        """The hierarchy whose directories are the workloads (every series of a workload is labelled by its path
        there, and its processes and threads are listed there): cgroup2 where mounted, hybrid hosts included; on hosts
        without it, the first of placing_order. None when no cgroup hierarchy is mounted."""
        if self.unified is not None:
            return Hierarchy(UNIFIED, self.unified)
        order = self.placing_order
        return Hierarchy(order[0], self.v1[order[0]]) if order else None

    @property
    def workload_tree(self) -> Path | None:
        """The mount point of workload_hierarchy."""
        hierarchy = self.workload_hierarchy
        return None if hierarchy is None else hierarchy.root


def read_layout(proc: ProcFS | None = None) -> CgroupLayout:
    """The cgroup and cgroup2 mounts of this process's mount namespace (/proc/self/mountinfo)."""
    text = (proc or ProcFS()).read_text("self", "mountinfo")
    if text is None:
        raise OSError("cannot read /proc/self/mountinfo: mount /proc")
    return parse_mountinfo(text)


def parse_mountinfo(text: str) -> CgroupLayout:
    """The cgroup and cgroup2 mounts listed in a mountinfo file's text."""
    unified: Path | None = None
    v1: dict[str, Path] = {}
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        tail = right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        mount_point = Path(_unescape(fields[4]))
        fstype, options = tail[0], tail[2]
        if fstype == "cgroup2" and unified is None:
            unified = mount_point
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in NOT_CONTROLLERS or option.startswith("release_agent"):
                    continue
                v1.setdefault(option, mount_point)
    return CgroupLayout(unified=unified, v1=v1)


def layout_under(root: Path) -> CgroupLayout:
    """The layout of a host's cgroup mount seen at *root* (e.g. /sys/fs/cgroup mounted into a container).

    A cgroup2 root (v2 host); or a tmpfs holding v1 hierarchies and unified/ (hybrid host), or v1 hierarchies
    alone (v1 host); or, failing all, *root* itself taken as the cgroup2 tree.
    """
    if (root / "cgroup.controllers").exists():
        return CgroupLayout(unified=root)
    v1: dict[str, Path] = {}
    if root.is_dir():
        for hierarchy in sorted(root.iterdir()):
            if (hierarchy / "tasks").exists():
                for controller in hierarchy.name.split(","):
                    v1.setdefault(controller if controller != "systemd" else "name=systemd", hierarchy)
    unified = root / "unified"
    if (unified / "cgroup.controllers").exists():
        return CgroupLayout(unified=unified, v1=v1)
    return CgroupLayout(unified=None if v1 else root, v1=v1)  # v1 only; or nothing recognisable: take root


def workload_tree(cgroup_root: Path | None = None) -> Path | None:
    """The workloads' tree of the host's cgroup mount at *cgroup_root*, or of this mount namespace's mounts."""
    return (layout_under(cgroup_root) if cgroup_root is not None else read_layout()).workload_tree


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """/proc/PID/cgroup -> {controller or '' for cgroup2: path}."""
    paths = {}
    for line in text.splitlines():
        _hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if not controllers:
            paths[""] = path
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


def parse_hierarchy_ids(text: str) -> dict[str, int]:
    """/proc/PID/cgroup -> {controller or '' for cgroup2: hierarchy id} (the id cgroup tracepoints call dst_root)."""
    ids: dict[str, int] = {}
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, _path = rest.partition(":")
        if not hierarchy.isdigit():
            continue
        for controller in controllers.split(",") if controllers else [""]:
            ids.setdefault(controller, int(hierarchy))
    return ids
