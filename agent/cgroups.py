"""cgroup facts: which hierarchies are mounted, and cgroup2 id -> path.

``bpf_get_current_cgroup_id()`` returns the kernfs id of the task's cgroup2
directory, which is that directory's inode number. The resolver finds the path
by walking the cgroup2 tree, caches it, and walks again only when an id it has
not seen appears or a cached one is gone (at most once per call).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")


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


def read_layout(mountinfo: Path = MOUNTINFO) -> CgroupLayout:
    """Parse /proc/self/mountinfo for cgroup and cgroup2 mounts."""
    unified: Path | None = None
    v1: dict[str, Path] = {}
    for line in mountinfo.read_text().splitlines():
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
                if option in ("rw", "ro") or option.startswith("release_agent") or option == "clone_children":
                    continue
                v1.setdefault(option, mount_point)
    return CgroupLayout(unified=unified, v1=v1)


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


class CgroupPathResolver:
    """Map cgroup2 ids to paths relative to the cgroup2 root ('/' is the root)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._paths: dict[int, str] = {}

    @property
    def healthy(self) -> bool:
        """True when the cgroup2 tree is visible, so a missing id really means a removed cgroup."""
        return self.root is not None and (self.root / "cgroup.procs").exists()

    def resolve(self, cgroup_ids: Iterable[int]) -> dict[int, str | None]:
        """Paths for *cgroup_ids*; None for ids whose cgroup no longer exists (or cannot be seen)."""
        wanted = set(cgroup_ids)
        stale = {cgroup_id for cgroup_id in wanted if not self._still_there(cgroup_id)}
        if stale and self.healthy:
            self._paths = self._walk()
        return {cgroup_id: self._paths.get(cgroup_id) for cgroup_id in wanted}

    def _still_there(self, cgroup_id: int) -> bool:
        path = self._paths.get(cgroup_id)
        if path is None or self.root is None:
            return False
        try:
            return os.stat(f"{self.root}{path}").st_ino == cgroup_id
        except OSError:
            return False

    def forget(self, cgroup_ids: Iterable[int]) -> None:
        """Drop ids of removed cgroups from the cache."""
        for cgroup_id in cgroup_ids:
            self._paths.pop(cgroup_id, None)

    def _walk(self) -> dict[int, str]:
        assert self.root is not None
        paths: dict[int, str] = {}
        root = str(self.root)
        for directory, _subdirs, _files in os.walk(root):
            try:
                inode = os.stat(directory).st_ino
            except OSError:
                continue  # removed while walking
            relative = directory[len(root) :] or "/"
            paths[inode] = relative
        return paths
