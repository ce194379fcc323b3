"""Kernel files read at every scrape, kept open and read again from their start.

A cgroup file costs ~14 us to open, read and close, and ~3 us to read again through a descriptor kept open
(pread at offset 0 makes the kernel write it afresh). At 1,000 workloads a scrape reads a file or two of each: the
descriptors are worth keeping. They are bounded (at most an eighth of the open-file limit, which the agent first
raises to its hard limit; fewer once the process runs out of descriptors), and one that is not read during a round
is closed at the round's end. A held cgroup file does not
keep its cgroup from being removed; reading it then fails with ENODEV, and the path is opened afresh once (a cgroup
of the same name may have been made since). Only files of cgroup filesystems are held: a removed file elsewhere
stays readable through its descriptor, which would serve what it held before.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import weakref
from functools import cache

from agent.machine.fdlimit import raise_fd_limit
from agent.machine.procfs import decode

SHARE_OF_FD_LIMIT = 8  # held at most: the open-file limit / this (perf mode's counters need the rest)
CHUNK = 65536  # a larger file (cgroup.threads of a huge cgroup) is read the usual way
SHORT_READ = os.sysconf("SC_PAGE_SIZE") // 2  # a read this short of a seq file reached its end
CGROUP_MAGICS = frozenset({0x27E0EB, 0x63677270})  # cgroup, cgroup2 (linux/magic.h)


def filesystem_type(path: str) -> int | None:
    """statfs(2)'s f_type of *path* (its first field on Linux), None if it cannot be asked."""
    libc = _libc()
    buffer = ctypes.create_string_buffer(256)  # larger than struct statfs on every Linux ABI
    if libc is None or libc.statfs(os.fsencode(path), buffer) != 0:
        return None
    return ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


class HeldFiles:
    """Reads files by path through descriptors kept open between rounds (bounded); not thread-safe.

    *roots*: the trees whose files may be held; those not on a cgroup filesystem are read the usual way.
    """

    def __init__(self, limit: int, roots: list[str]) -> None:
        self.roots = tuple(root.rstrip("/") + "/" for root in roots if filesystem_type(root) in CGROUP_MAGICS)
        self.limit = max(0, min(limit, raise_fd_limit() // SHARE_OF_FD_LIMIT)) if self.roots else 0
        self._open: dict[str, int] = {}
        self._read_this_round: set[str] = set()
        weakref.finalize(self, _close_all, self._open)

    def __len__(self) -> int:
        return len(self._open)

    def read(self, path: str) -> str | None:
        """The file's text now; None when it is gone or unreadable."""
        self._read_this_round.add(path)
        fd = self._open.get(path)
        if fd is not None:
            data = self._pread(path, fd)
            if data is not None:
                return data
        return self._open_and_read(path)

    def end_round(self) -> None:
        """Close what was not read since the last end of a round."""
        for path in [path for path in self._open if path not in self._read_this_round]:
            os.close(self._open.pop(path))
        self._read_this_round = set()

    def _give_back(self) -> None:
        """Hold at most half as many descriptors from now on, closing the rest."""
        self.limit = len(self._open) // 2
        for path in list(self._open)[self.limit :]:
            os.close(self._open.pop(path))

    def close(self) -> None:
        """Close every held descriptor."""
        _close_all(self._open)

    def _pread(self, path: str, fd: int) -> str | None:
        # A read of a kernel seq file returns about a page at most, not the whole file: read on to the end. It
        # stops short of a page only at the end (or for a record too long to fit, which cgroup files' are not).
        chunks, offset = [], 0
        try:
            while chunk := os.pread(fd, CHUNK, offset):
                chunks.append(chunk)
                offset += len(chunk)
                if len(chunk) < SHORT_READ:
                    break
                if offset >= CHUNK:  # grown too large to hold: read the usual way from now on
                    os.close(self._open.pop(path))
                    return None
        except OSError:  # ENODEV: its cgroup was removed (one of the same name may have been made since)
            os.close(self._open.pop(path))
            return None
        return decode(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def _open_and_read(self, path: str) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE) or not self._open:
                return None
            self._give_back()  # out of descriptors: hold fewer, and read this one with one of those freed
            return self._open_and_read(path)
        try:
            chunks = []
            while chunk := os.read(fd, CHUNK):
                chunks.append(chunk)
        except OSError:
            os.close(fd)
            return None
        held = len(self._open) < self.limit and path.startswith(self.roots)
        if held and sum(len(chunk) for chunk in chunks) < CHUNK:
            self._open[path] = fd
        else:
            os.close(fd)
        return decode(b"".join(chunks))


def _close_all(descriptors: dict[str, int]) -> None:
    # A copy: an agent stopped while a scrape still runs (its client gave up) may hold a new file meanwhile.
    for fd in list(descriptors.values()):
        with contextlib.suppress(OSError):
            os.close(fd)
    descriptors.clear()
