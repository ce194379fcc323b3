"""A cgroup's CPU files, v1 and v2: its limit (the tightest quota over its ancestors, and its cpuset), its throttling,
and the CPU time it used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.machine.cgroups.files import Reader, cgroup_directory, parse_flat_keyed, parse_int, read_cgroup_file
from agent.machine.cpus import parse_cpu_list


@dataclass(frozen=True)
class CpuControl:
    """CPU limits and throttling of one cgroup, from whichever hierarchy holds the cpu controller."""

    periods: int  # enforcement periods elapsed while the cgroup had runnable threads
    throttled_periods: int
    throttled_ns: int
    limit_cores: float  # the tighter of the CFS quota (over every ancestor) and the cpuset, in CPUs


def _ancestors(root: Path, relative: str) -> list[str]:
    """The cgroup directory of *relative* and each of its ancestors up to *root*, innermost first."""
    parts = [p for p in relative.split("/") if p]
    return [cgroup_directory(root, "/".join(parts[:depth])) for depth in range(len(parts), -1, -1)]


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


def read_cpu_v2(root: Path, relative: str, online_cpus: int, read: Reader = read_cgroup_file) -> CpuControl | None:
    """cpu.stat, cpu.max and cpuset.cpus.effective of a cgroup2 directory; None without the cpu controller."""
    directory = cgroup_directory(root, relative)
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
    read: Reader = read_cgroup_file,
) -> CpuControl | None:
    """cpu.stat and cpu.cfs_* of a v1 cpu cgroup, and cpuset.effective_cpus of its v1 cpuset cgroup."""
    stat_text = read(f"{cgroup_directory(cpu_root, cpu_relative)}/cpu.stat")
    if stat_text is None:
        return None
    stat = parse_flat_keyed(stat_text)
    cpuset_text = None
    if cpuset_root is not None:
        cpuset_dir = cgroup_directory(cpuset_root, cpuset_relative)
        cpuset_text = read(f"{cpuset_dir}/cpuset.effective_cpus") or read(f"{cpuset_dir}/cpuset.cpus")
    limit = _limit(_quota_cores(cpu_root, cpu_relative, _cfs_quota_v1, read), cpuset_text, online_cpus)
    return CpuControl(stat.get("nr_periods", 0), stat.get("nr_throttled", 0), stat.get("throttled_time", 0), limit)


@dataclass(frozen=True)
class CpuUsage:
    """CPU time used by a cgroup and its descendants since it was made, in nanoseconds."""

    user_ns: int
    system_ns: int


def read_usage_v2(root: Path, relative: str, read: Reader = read_cgroup_file) -> CpuUsage | None:
    """user_usec and system_usec of a cgroup2 cpu.stat (there whether or not the cpu controller is enabled)."""
    stat = parse_flat_keyed(read(f"{cgroup_directory(root, relative)}/cpu.stat") or "")
    if "user_usec" not in stat or "system_usec" not in stat:
        return None
    return CpuUsage(stat["user_usec"] * 1000, stat["system_usec"] * 1000)


def read_usage_v1(cpuacct_root: Path, relative: str, read: Reader = read_cgroup_file) -> CpuUsage | None:
    """CPU used by a v1 cpuacct cgroup: cpuacct.usage (ns, exact) split in the ratio of its user and system ticks.

    cpuacct.usage_user/usage_sys (and cpuacct.stat) are sampled at each tick, so their sum drifts from the exact
    total by several percent; the kernel scales cgroup2's cpu.stat the same way. The split of two readings can
    move back slightly: :class:`MonotonicSplit` keeps each part from going backwards.
    """
    directory = cgroup_directory(cpuacct_root, relative)
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
