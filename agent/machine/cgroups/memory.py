"""A cgroup's memory files, v1 and v2: the limit that applies to it, how often it hit it, and the page faults and
refaults (pages reclaimed, then needed again) of its tasks.

cgroup2 (memory controller enabled there): ``memory.max`` and ``memory.high`` of the cgroup and its ancestors (the
tightest applies), ``memory.events`` (high, max, oom, oom_kill: the cgroup and its descendants) and ``memory.stat``
(pgfault, pgmajfault, workingset_refault_anon/file). v1: ``memory.stat``'s hierarchical_memory_limit (the tightest
limit over the ancestors) and its ``total_*`` counters (the cgroup and its descendants), ``memory.failcnt`` (times a
charge hit the limit: the v1 form of the ``max`` event) and ``memory.oom_control``'s oom_kill.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.machine.cgroups.files import Reader, cgroup_directory, parse_flat_keyed, parse_int, read_cgroup_file

EVENTS = ("high", "max", "oom", "oom_kill")  # the memory.events a workload's series name, in this order
# v1 writes PAGE_COUNTER_MAX pages (rounded to the page size) for "no limit": anything this large limits nothing.
UNLIMITED_FROM = 1 << 62


@dataclass(frozen=True)
class MemoryState:
    """One reading of a cgroup's memory accounting; counters are cumulative, None when the files do not say."""

    limit_bytes: int | None  # the tightest hard limit (memory.max, v1 limit_in_bytes) over it and its ancestors
    high_bytes: int | None  # the tightest memory.high (cgroup2 only): above it the kernel throttles and reclaims
    events: dict[str, int]  # by EVENTS; v1 has max (failcnt) and oom_kill only
    page_faults: int | None  # every fault, minor and major
    major_page_faults: int | None
    refaults: int | None  # pages reclaimed from it and faulted back in (anon and file)


def _bytes(text: str | None) -> int | None:
    """A memory.max-style value: bytes, or None for "max" and anything that limits nothing."""
    value = parse_int(text or "")
    return value if value is not None and 0 <= value < UNLIMITED_FROM else None


def _tightest(root: Path, relative: str, name: str, read: Reader) -> int | None:
    """The least of file *name* over the cgroup and its ancestors (below the root, which has none)."""
    parts = [part for part in relative.split("/") if part]
    found = [
        _bytes(read(f"{cgroup_directory(root, '/'.join(parts[:depth]))}/{name}")) for depth in range(len(parts), 0, -1)
    ]
    limits = [value for value in found if value is not None]
    return min(limits) if limits else None


def _refaults(stat: dict[str, int], prefix: str) -> int | None:
    """workingset refaults of both kinds (Linux 5.9 and later), or the one count older kernels give."""
    split = [stat.get(f"{prefix}workingset_refault_{kind}") for kind in ("anon", "file")]
    if all(value is None for value in split):
        return stat.get(f"{prefix}workingset_refault")
    return sum(value or 0 for value in split)


def read_memory_v2(root: Path, relative: str, read: Reader = read_cgroup_file) -> MemoryState | None:
    """memory.stat, memory.events, memory.max and memory.high of a cgroup2 directory; None without the memory
    controller there (or when it is gone)."""
    directory = cgroup_directory(root, relative)
    stat_text = read(f"{directory}/memory.stat")
    if stat_text is None:
        return None
    stat = parse_flat_keyed(stat_text)
    events = parse_flat_keyed(read(f"{directory}/memory.events") or "")
    return MemoryState(
        limit_bytes=_tightest(root, relative, "memory.max", read),
        high_bytes=_tightest(root, relative, "memory.high", read),
        events={name: events[name] for name in EVENTS if name in events},
        page_faults=stat.get("pgfault"),
        major_page_faults=stat.get("pgmajfault"),
        refaults=_refaults(stat, ""),
    )


def read_memory_v1(root: Path, relative: str, read: Reader = read_cgroup_file) -> MemoryState | None:
    """memory.stat, memory.failcnt and memory.oom_control of a v1 memory cgroup; None when it is gone."""
    directory = cgroup_directory(root, relative)
    stat_text = read(f"{directory}/memory.stat")
    if stat_text is None:
        return None
    stat = parse_flat_keyed(stat_text)
    events: dict[str, int] = {}
    failures = parse_int(read(f"{directory}/memory.failcnt") or "")
    if failures is not None:
        events["max"] = failures
    killed = parse_flat_keyed(read(f"{directory}/memory.oom_control") or "").get("oom_kill")
    if killed is not None:
        events["oom_kill"] = killed
    limit = stat.get("hierarchical_memory_limit")
    return MemoryState(
        limit_bytes=limit if limit is not None and limit < UNLIMITED_FROM else None,
        high_bytes=None,
        events=events,
        page_faults=stat.get("total_pgfault"),
        major_page_faults=stat.get("total_pgmajfault"),
        refaults=_refaults(stat, "total_"),
    )
