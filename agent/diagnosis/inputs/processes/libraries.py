"""Thread-pool libraries a process has mapped, read from /proc/PID/maps, with their versions where the file tells
(the file names and version patterns are the rows of agent/diagnosis/pools.py).

The path in maps is already resolved: the kernel names the file mapped, not the symlink that was opened
(``libgomp.so.1`` shows as ``libgomp.so.1.0.0``). A library is recognised by its basename: lowercased, it must
start with one of the row's prefixes followed by ``.`` or ``-`` (``libgomp.so.1.0.0``,
``libgomp-a34b3233.so.1.0.0`` as wheels vendor it, but not ``libgompfoo.so``).

The version comes from the file name where it tells it (OpenBLAS's ``-r0.3.21``, a wheel's
``-r0-<hash>.3.23.dev``, a soname's ``.so.1.0.0``), otherwise from a bounded read of the file's ``.rodata`` section
(OpenBLAS embeds "OpenBLAS 0.3.31"). That file is opened through /proc/PID/map_files/, which names the very file
mapped (in a container too) without resolving its path again: a tenant cannot swap in a symlink or a FIFO.
Opening map_files needs CAP_SYS_ADMIN; without it the version is "unknown" unless the name tells it.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agent.diagnosis.pools import PoolImplementation, implementation_of
from agent.machine.procfs import ProcFS, decode, printable

RODATA_LIMIT = 4 * 1024 * 1024  # bytes of .rodata searched for a version (OpenBLAS's is ~130 KB)
SECTION_TABLE_LIMIT = 256 * 1024  # ELF section headers read at most
DELETED = " (deleted)"


@dataclass(frozen=True)
class Library:
    """A thread-pool library mapped by a process."""

    api: str
    implementation: str
    path: str  # as the process sees it, printable
    version: str | None
    version_source: str  # "file name", "file contents" or "unknown"


def version_from_name(kind: PoolImplementation, basename: str) -> str | None:
    """The version the file name tells, or None."""
    if kind.name_version is None:
        return None
    match = kind.name_version.search(basename.lower())
    if match is None:
        return None
    return ".".join(group for group in match.groups() if group)


def mapped_files(maps: str) -> dict[str, str]:
    """Distinct file paths in the text of /proc/PID/maps, in order of first mapping, each with the address range
    of its first mapping (the name of its entry in /proc/PID/map_files)."""
    seen: dict[str, str] = {}
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[4] == "0" or not fields[5].startswith("/"):
            continue
        path = fields[5]
        if path.endswith(DELETED):
            path = path[: -len(DELETED)]
        seen.setdefault(path, fields[0])
    return seen


def libraries_in(
    procfs: ProcFS, pid: int | str, maps: str, versions: dict[tuple[int, int, int], str | None] | None = None
) -> list[Library]:
    """Thread-pool libraries among the files mapped by *pid* (maps already read), one entry per file.

    *versions* caches versions read from file contents, keyed by the file's device, inode and size, so that the
    workers of one pool cost one read.
    """
    cache = {} if versions is None else versions
    found = []
    for path, addresses in mapped_files(maps).items():
        basename = path.rsplit("/", 1)[-1]
        kind = implementation_of(basename)
        if kind is None:
            continue
        version = version_from_name(kind, basename)
        source = "file name"
        if version is None and kind.content_version is not None:
            mapped = procfs.path(pid, f"map_files/{addresses}")
            version = _version_from_contents(mapped, kind.content_version, cache)
            source = "file contents"
        found.append(Library(kind.api, kind.implementation, printable(path), version, source if version else "unknown"))
    return found


def _version_from_contents(
    path: Path, pattern: re.Pattern[bytes], cache: dict[tuple[int, int, int], str | None]
) -> str | None:
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                return None
            key = (status.st_dev, status.st_ino, status.st_size)
            if key not in cache:
                rodata = read_rodata(file)
                match = None if rodata is None else pattern.search(rodata)
                cache[key] = None if match is None else decode(match.group(1))
            return cache[key]
    except OSError:
        return None


def read_rodata(file: BinaryIO) -> bytes | None:
    """The .rodata section of an ELF64 little-endian file (at most RODATA_LIMIT bytes), or None."""
    header = _read_at(file, 0, 64)
    if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
        return None
    (section_offset,) = struct.unpack_from("<Q", header, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", header, 0x3A)
    if entry_size < 64 or count == 0 or names_index >= count or entry_size * count > SECTION_TABLE_LIMIT:
        return None
    table = _read_at(file, section_offset, entry_size * count)
    if len(table) < entry_size * count:
        return None
    sections = [_section(table, index * entry_size) for index in range(count)]
    names_at, names_size = sections[names_index][1:]
    names = _read_at(file, names_at, min(names_size, SECTION_TABLE_LIMIT))
    for name_offset, offset, size in sections:
        end = names.find(b"\0", name_offset)
        if names[name_offset:end] == b".rodata":
            return _read_at(file, offset, min(size, RODATA_LIMIT))
    return None


def _section(table: bytes, at: int) -> tuple[int, int, int]:
    """(name offset, file offset, size) of the ELF64 section header at *at*."""
    (name,) = struct.unpack_from("<I", table, at)
    offset, size = struct.unpack_from("<QQ", table, at + 0x18)
    return name, offset, size


def _read_at(file: BinaryIO, offset: int, size: int) -> bytes:
    file.seek(offset)
    return file.read(size)


def file_version(
    basename: str, opened: Path, versions: dict[tuple[int, int, int], str | None] | None = None
) -> str | None:
    """The version of the thread-pool library file named *basename* (opened at *opened*: its /proc/PID/map_files
    entry), from its name or its contents; None for a file of no known pool, or one that does not say."""
    kind = implementation_of(basename)
    if kind is None:
        return None
    version = version_from_name(kind, basename)
    if version is None and kind.content_version is not None:
        version = _version_from_contents(opened, kind.content_version, {} if versions is None else versions)
    return version


def distinct(libraries: Iterable[Library]) -> list[Library]:
    """Libraries with duplicates (the same file in several processes) removed, in order of first appearance."""
    return list(dict.fromkeys(libraries))
