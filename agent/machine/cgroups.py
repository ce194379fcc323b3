"""cgroup facts: which hierarchies are mounted, and cgroup2 id -> path.

``bpf_get_current_cgroup_id()`` returns the kernfs id of the task's cgroup2
directory, which is that directory's inode number. The resolver finds the path
by walking the cgroup2 tree, caches it, and walks again only when an id it has
not seen appears or a cached one is gone (at most once per call).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent.machine.cpus import parse_cpu_list
from agent.machine.procfs import ProcFS, decode


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
                if option in ("rw", "ro") or option.startswith("release_agent") or option == "clone_children":
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


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


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

    def begin_round(self) -> None:
        """A scrape begins: ids are checked again, and what is checked or walked now stands until the next round."""
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
    return parse_flat_keyed(_read(f"{root}/cgroup.stat") or "").get("nr_descendants")


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


@dataclass(frozen=True)
class CpuControl:
    """CPU limits and throttling of one cgroup, from whichever hierarchy holds the cpu controller."""

    periods: int  # enforcement periods elapsed while the cgroup had runnable threads
    throttled_periods: int
    throttled_ns: int
    limit_cores: float  # the tighter of the CFS quota (over every ancestor) and the cpuset, in CPUs


def parse_int(text: str) -> int | None:
    """A decimal integer as the kernel writes one ('-1' included), or None for anything else."""
    text = text.strip()
    digits = text[1:] if text.startswith("-") else text
    return int(text) if digits.isascii() and digits.isdigit() else None


def parse_flat_keyed(text: str) -> dict[str, int]:
    """A cgroup 'key value' file such as cpu.stat."""
    values = {}
    for line in text.splitlines():
        key, _, value_text = line.partition(" ")
        value = parse_int(value_text)
        if value is not None:
            values[key] = value
    return values


Reader = Callable[[str], "str | None"]  # a cgroup file's text by path, None when gone or unreadable


def _read(path: str | Path) -> str | None:
    """A cgroup file decoded by the agent's one policy (agent.machine.procfs.decode); None when gone or unreadable.

    Read with bare descriptors: a scrape reads a few files of every cgroup, and pathlib's open costs 3x as much.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return decode(chunks[0] if len(chunks) == 1 else b"".join(chunks))


def _directory(root: Path | str, relative: str) -> str:
    """The cgroup directory *relative* (from the hierarchy's root, '/' the root itself) below *root*, as a string."""
    inner = relative.strip("/")
    return f"{root}/{inner}" if inner else str(root)


def _ancestors(root: Path, relative: str) -> list[str]:
    """The cgroup directory of *relative* and each of its ancestors up to *root*, innermost first."""
    parts = [p for p in relative.split("/") if p]
    return [_directory(root, "/".join(parts[:depth])) for depth in range(len(parts), -1, -1)]


def _cpu_max(cgroup: str, read: Reader) -> tuple[int | None, int]:
    """(quota, period) in µs from a cgroup2 cpu.max; quota None when unlimited or absent."""
    fields = (read(f"{cgroup}/cpu.max") or "").split() or ["max"]
    quota = None if fields[0] == "max" else parse_int(fields[0])
    period = parse_int(fields[1]) if len(fields) > 1 else 100000
    return (quota, period) if period is not None else (None, 0)


def _cfs_quota_v1(cgroup: str, read: Reader) -> tuple[int | None, int]:
    """(quota, period) in µs from cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us; quota None when -1."""
    quota = parse_int(read(f"{cgroup}/cpu.cfs_quota_us") or "")
    if quota is None or quota < 0:
        return None, 0  # unlimited: the period does not matter
    period = parse_int(read(f"{cgroup}/cpu.cfs_period_us") or "")
    if quota is None or period is None or quota < 0:
        return None, 0
    return quota, period


def _quota_cores(
    root: Path, relative: str, quota_of: Callable[[str, Reader], tuple[int | None, int]], read: Reader
) -> float | None:
    """The tightest CFS quota over a cgroup and its ancestors, in CPUs (None: unlimited)."""
    tightest: float | None = None
    for cgroup in _ancestors(root, relative):
        quota, period = quota_of(cgroup, read)
        if quota is not None and quota > 0 and period > 0:
            cores = quota / period
            tightest = cores if tightest is None else min(tightest, cores)
    return tightest


def _limit(quota_cores: float | None, cpuset_text: str | None, online_cpus: int) -> float:
    """The least of the online CPUs, the quota and the cpuset's CPUs (an empty or malformed cpuset limits nothing)."""
    limit = float(online_cpus)
    if quota_cores is not None:
        limit = min(limit, quota_cores)
    try:
        cpuset = parse_cpu_list(cpuset_text or "")
    except ValueError:
        cpuset = ()
    if cpuset:
        limit = min(limit, float(len(cpuset)))
    return limit


def read_cpu_v2(root: Path, relative: str, online_cpus: int, read: Reader = _read) -> CpuControl | None:
    """cpu.stat, cpu.max and cpuset.cpus.effective of a cgroup2 directory; None without the cpu controller."""
    directory = _directory(root, relative)
    stat_text = read(f"{directory}/cpu.stat")
    if stat_text is None or "nr_periods" not in stat_text:
        return None  # the cpu controller is not enabled here (cpu.stat then holds only usage)
    stat = parse_flat_keyed(stat_text)
    quota = _quota_cores(root, relative, _cpu_max, read)
    limit = _limit(quota, read(f"{directory}/cpuset.cpus.effective"), online_cpus)
    return CpuControl(
        stat.get("nr_periods", 0), stat.get("nr_throttled", 0), stat.get("throttled_usec", 0) * 1000, limit
    )


def read_cpu_v1(
    cpu_root: Path,
    cpu_relative: str,
    cpuset_root: Path | None,
    cpuset_relative: str,
    online_cpus: int,
    read: Reader = _read,
) -> CpuControl | None:
    """cpu.stat and cpu.cfs_* of a v1 cpu cgroup, and cpuset.effective_cpus of its v1 cpuset cgroup."""
    stat_text = read(f"{_directory(cpu_root, cpu_relative)}/cpu.stat")
    if stat_text is None:
        return None
    stat = parse_flat_keyed(stat_text)
    cpuset_text = None
    if cpuset_root is not None:
        cpuset_dir = _directory(cpuset_root, cpuset_relative)
        cpuset_text = read(f"{cpuset_dir}/cpuset.effective_cpus") or read(f"{cpuset_dir}/cpuset.cpus")
    limit = _limit(_quota_cores(cpu_root, cpu_relative, _cfs_quota_v1, read), cpuset_text, online_cpus)
    return CpuControl(stat.get("nr_periods", 0), stat.get("nr_throttled", 0), stat.get("throttled_time", 0), limit)


@dataclass(frozen=True)
class CpuUsage:
    """CPU time used by a cgroup and its descendants since it was made, in nanoseconds."""

    user_ns: int
    system_ns: int


def read_usage_v2(root: Path, relative: str, read: Reader = _read) -> CpuUsage | None:
    """user_usec and system_usec of a cgroup2 cpu.stat (there whether or not the cpu controller is enabled)."""
    stat = parse_flat_keyed(read(f"{_directory(root, relative)}/cpu.stat") or "")
    if "user_usec" not in stat or "system_usec" not in stat:
        return None
    return CpuUsage(stat["user_usec"] * 1000, stat["system_usec"] * 1000)


def read_usage_v1(cpuacct_root: Path, relative: str, read: Reader = _read) -> CpuUsage | None:
    """CPU used by a v1 cpuacct cgroup: cpuacct.usage (ns, exact) split in the ratio of its user and system ticks.

    cpuacct.usage_user/usage_sys (and cpuacct.stat) are sampled at each tick, so their sum drifts from the exact
    total by several percent; the kernel scales cgroup2's cpu.stat the same way. The split of two readings can
    move back slightly: :class:`MonotonicSplit` keeps each part from going backwards.
    """
    directory = _directory(cpuacct_root, relative)
    total = parse_int(read(f"{directory}/cpuacct.usage") or "")
    if total is None:
        return None
    user = parse_int(read(f"{directory}/cpuacct.usage_user") or "")
    system = parse_int(read(f"{directory}/cpuacct.usage_sys") or "")
    if user is None or system is None:
        stat = parse_flat_keyed(read(f"{directory}/cpuacct.stat") or "")
        user, system = stat.get("user"), stat.get("system")
    if user is None or system is None:
        return None
    if user + system == 0:
        return CpuUsage(total, 0)
    user_ns = round(total * user / (user + system))
    return CpuUsage(user_ns, total - user_ns)


class MonotonicSplit:
    """Keeps the user and system parts of a growing total from going backwards (as the kernel's cputime_adjust)."""

    def __init__(self) -> None:
        self._last: dict[object, CpuUsage] = {}

    def adjust(self, key: object, usage: CpuUsage) -> CpuUsage:
        """*usage* with neither part below its last value for *key* (the total is kept when it grew)."""
        last = self._last.get(key)
        if last is not None:
            total = usage.user_ns + usage.system_ns
            if total < last.user_ns + last.system_ns:
                usage = last  # a reading older than the last one: keep the last
            elif usage.user_ns < last.user_ns:
                usage = CpuUsage(last.user_ns, total - last.user_ns)
            elif usage.system_ns < last.system_ns:
                usage = CpuUsage(total - last.system_ns, last.system_ns)
        self._last[key] = usage
        return usage

    def keep_only(self, keys: set[object]) -> None:
        """Forget keys no longer read."""
        self._last = {key: value for key, value in self._last.items() if key in keys}


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


def count_threads(root: Path, relative: str, threads_file: str = "cgroup.threads", read: Reader = _read) -> int | None:
    """Threads directly in a cgroup directory (cgroup.threads; `tasks` in v1); None if it is gone."""
    text = read(f"{_directory(root, relative)}/{threads_file}")
    return None if text is None else len(text.split())


def first_process(root: Path, relative: str) -> int | None:
    """One pid of a cgroup2 directory, to find its v1 paths through /proc/PID/cgroup."""
    text = _read(f"{_directory(root, relative)}/cgroup.procs")
    first = text.split()[0] if text and text.split() else ""
    return parse_int(first) if first else None
