"""cgroup2 id -> path.

``bpf_get_current_cgroup_id()`` returns the kernfs id of the task's cgroup2 directory, which is that directory's
inode number. The resolver finds the path by walking the cgroup2 tree, caches it, and walks again only when an id
it has not seen appears or a cached one is gone (at most once per call).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from agent.machine.cgroups.files import parse_flat_keyed, read_cgroup_file


class CgroupPathResolver:
    """Map cgroup2 ids to paths relative to the cgroup2 root ('/' is the root).

    Walking the tree costs ~20 ms per 1,000 cgroups, a stat of one path ~5 us, so the tree is walked only when it
    changed. Once the agent marks the start of each scrape (:meth:`begin_round`), the root's count of descendants
    (cgroup2's cgroup.stat) says whether any cgroup was made or removed since the last walk: if not, and that walk
    is less than REWALK_SECONDS old, it answers the whole round (no stat, no walk). Otherwise each known id is
    checked by a stat, once per round, and an unknown or gone one makes a walk. A cgroup removed and another made
    between two scrapes leave the count as it was: the new one is found when a BPF program first counts in it (an
    unknown id makes a walk, which also finds the removal), or at the next rewalk.
    """

    REWALK_SECONDS = 60.0

    def __init__(self, root: Path | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self._clock = clock
        self._paths: dict[int, str] = {}
        self._in_rounds = False
        self._walked_this_round = False
        self._confirmed: set[int] = set()  # ids whose paths were checked this round
        self._descendants_at_walk: int | None = None
        self._round_unchanged: bool | None = None  # this round's answer of _tree_unchanged, once asked
        self._walked_at = -self.REWALK_SECONDS
        self.round: int | None = None  # which scrape's round this is (None before the first)

    def begin_round(self) -> None:
        """A scrape begins: ids are checked again, and what is checked or walked now stands until the next round."""
        self.round = (self.round or 0) + 1
        self._in_rounds = True
        self._walked_this_round = False
        self._confirmed = set()
        self._round_unchanged = None

    @property
    def healthy(self) -> bool:
        """True when the cgroup2 tree is visible, so a missing id really means a removed cgroup."""
        return self.root is not None and (self.root / "cgroup.procs").exists()

    def resolve(self, cgroup_ids: Iterable[int]) -> dict[int, str | None]:
        """Paths for *cgroup_ids*; None for ids whose cgroup no longer exists (or cannot be seen)."""
        wanted = set(cgroup_ids)
        if self._walked_this_round:
            stale = wanted - self._paths.keys()
        elif self._in_rounds and wanted <= self._paths.keys() and self._unchanged_this_round():
            stale = set()  # no cgroup made or removed since the walk that named them all
        else:
            unchecked = wanted - self._confirmed
            stale = {cgroup_id for cgroup_id in unchecked if not self._still_there(cgroup_id)}
            if self._in_rounds:
                self._confirmed |= unchecked - stale
        if stale and self.healthy:
            self._refresh()
        return {cgroup_id: self._paths.get(cgroup_id) for cgroup_id in wanted}

    def _refresh(self) -> None:
        descendants = _descendants(self.root)  # before the walk: a cgroup made during it is a change next time
        self._paths = self._walk()
        self._descendants_at_walk = descendants
        self._walked_at = self._clock()
        self._walked_this_round = self._in_rounds

    def _unchanged_this_round(self) -> bool:
        if self._round_unchanged is None:
            self._round_unchanged = self._tree_unchanged()
        return self._round_unchanged

    def _tree_unchanged(self) -> bool:
        """No cgroup made or removed since the last walk, as far as the root's count of descendants tells."""
        if self._descendants_at_walk is None or self._clock() - self._walked_at >= self.REWALK_SECONDS:
            return False
        return _descendants(self.root) == self._descendants_at_walk

    def _still_there(self, cgroup_id: int) -> bool:
        path = self._paths.get(cgroup_id)
        if path is None or self.root is None:
            return False
        try:
            return _inode(str(self.root), path) == cgroup_id
        except OSError:
            return False

    def snapshot(self, this_round: bool = False) -> dict[int, str]:
        """Every cgroup that exists now, by id. Walks the tree unless *this_round* and either a walk was made in
        the round or the tree did not change since the last walk."""
        if this_round and self._in_rounds and (self._walked_this_round or self._unchanged_this_round()):
            return dict(self._paths)
        if self.healthy:
            self._refresh()
        return dict(self._paths)

    def forget(self, cgroup_ids: Iterable[int]) -> None:
        """Drop ids of removed cgroups from the cache."""
        for cgroup_id in cgroup_ids:
            self._paths.pop(cgroup_id, None)

    def _walk(self) -> dict[int, str]:
        """Every directory of the tree by inode; by directory descriptors, so paths longer than PATH_MAX are seen."""
        assert self.root is not None
        paths: dict[int, str] = {}
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
        # Depth first without recursion, holding a descriptor per level only (a tenant may nest thousands of
        # levels: below MAX_WALK_DEPTH directories go unnamed and their counts to "(removed)", nothing fails).
        stack: list[tuple[int, str, list[str]]] = []
        try:
            stack.append(_opened(os.open(self.root, flags), "", paths))
            while stack:
                fd, relative, names = stack[-1]
                if not names or len(stack) >= MAX_WALK_DEPTH:
                    os.close(fd)
                    stack.pop()
                    continue
                name = names.pop()
                try:
                    child = os.open(name, flags, dir_fd=fd)
                except OSError:  # removed meanwhile
                    continue
                try:
                    stack.append(_opened(child, f"{relative}/{name}", paths))
                except OSError:
                    os.close(child)
        finally:
            for fd, _relative, _names in stack:
                os.close(fd)
        return paths


def _descendants(root: Path | None) -> int | None:
    """nr_descendants of the root's cgroup.stat (cgroup2): every cgroup below it; None where there is none."""
    if root is None:
        return None
    return parse_flat_keyed(read_cgroup_file(f"{root}/cgroup.stat") or "").get("nr_descendants")


PATH_MAX = 4096


MAX_WALK_DEPTH = 256


def _opened(fd: int, relative: str, paths: dict[int, str]) -> tuple[int, str, list[str]]:
    """Record the directory open at *fd* by its inode; (fd, its relative path, its subdirectories' names)."""
    paths[os.fstat(fd).st_ino] = relative or "/"
    with os.scandir(fd) as entries:
        names = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
    return fd, relative, names


def _inode(root: str, relative: str) -> int:
    """The inode of *root*/*relative*; a path longer than PATH_MAX (a tenant's deep tree) is opened step by step."""
    full = f"{root}{relative}"
    if len(os.fsencode(full)) < PATH_MAX:
        return os.stat(full).st_ino
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for component in relative.strip("/").split("/"):
            child = os.open(component, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = child
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)
