"""Reading a cgroup's files: one decoding policy, the kernel's integers and flat-keyed files, a directory's threads
and first process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from agent.machine.procfs import decode


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


def read_cgroup_file(path: str | Path) -> str | None:
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


def cgroup_directory(root: Path | str, relative: str) -> str:
    """The cgroup directory *relative* (from the hierarchy's root, '/' the root itself) below *root*, as a string."""
    inner = relative.strip("/")
    return f"{root}/{inner}" if inner else str(root)


def count_threads(
    root: Path, relative: str, threads_file: str = "cgroup.threads", read: Reader = read_cgroup_file
) -> int | None:
    """Threads directly in a cgroup directory (cgroup.threads; `tasks` in v1); None if it is gone."""
    text = read(f"{cgroup_directory(root, relative)}/{threads_file}")
    return None if text is None else len(text.split())


def first_process(root: Path, relative: str) -> int | None:
    """One pid of a cgroup2 directory, to find its v1 paths through /proc/PID/cgroup."""
    text = read_cgroup_file(f"{cgroup_directory(root, relative)}/cgroup.procs")
    first = text.split()[0] if text and text.split() else ""
    return parse_int(first) if first else None


def v2_controllers(root: Path) -> set[str]:
    """The controllers a cgroup2 directory offers (its cgroup.controllers; none if unreadable)."""
    return set((read_cgroup_file(root / "cgroup.controllers") or "").split())


def outermost(cgroups: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The (path, id) of the cgroups with no ancestor among *cgroups*: a parent's counters already include its
    children's."""
    paths = {path for path, _cgroup_id in cgroups}
    kept = []
    for path, cgroup_id in cgroups:
        parts = path.split("/")
        if not any("/".join(parts[:depth]) in paths for depth in range(2, len(parts))):
            kept.append((path, cgroup_id))
    return kept
