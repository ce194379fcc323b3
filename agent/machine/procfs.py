"""The one reader of /proc, with one policy for bytes that are not UTF-8.

Policy: text read from /proc (and names read from the filesystem) is decoded losslessly, as the operating system
does for file names (``surrogateescape``), so that a path read here can be opened again. Such text never reaches a
label, a log line or a report as it is: :func:`printable` turns every undecodable byte into a visible ``\\xNN``.

The root is a parameter so that a fixture tree copied from a real host can stand in for the machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

PROC = Path("/proc")
SMALL_FILE = 65536  # stat, status, cgroup, comm: one read system call
MAX_FILE = 8 * 1024 * 1024  # maps of a large process; anything longer is cut here


def decode(raw: bytes) -> str:
    """Bytes from the kernel -> str, losslessly (undecodable bytes become lone surrogates, as in os.fsdecode)."""
    return raw.decode("utf-8", "surrogateescape")


def printable(text: str) -> str:
    """*text* (possibly holding surrogate escapes) as valid UTF-8 with every undecodable byte shown as ``\\xNN``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join(_encodable(char) for char in text)


def _encodable(char: str) -> str:
    """One character as valid UTF-8: a surrogate escape as its byte ``\\xNN``, any other lone surrogate ``\\uNNNN``."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return char


class ProcFS:
    """Files of /proc (or of a fixture tree laid out like it)."""

    def __init__(self, root: Path = PROC) -> None:
        self.root = root

    def path(self, pid: int | str, name: str = "") -> Path:
        """/proc/PID/NAME under this root."""
        base = self.root / str(pid)
        return base / name if name else base

    def read_bytes(self, pid: int | str, name: str, limit: int = MAX_FILE) -> bytes | None:
        """Up to *limit* bytes of /proc/PID/NAME; None when the process (or the file) is gone or unreadable.

        Small files take one system call; a process vanishing in the middle of a read is "gone", never an error.
        """
        try:
            fd = os.open(self.path(pid, name), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if limit <= SMALL_FILE:  # stat, cgroup, comm: whole in one read (the kernel fills it at once)
                return os.read(fd, limit)
            chunks = []
            total = 0
            while total < limit:
                chunk = os.read(fd, min(SMALL_FILE, limit - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            return b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def read_bytes_permitted(self, pid: int | str, name: str, limit: int = MAX_FILE) -> bytes | None:
        """Like :meth:`read_bytes`, but a file the kernel refuses to show raises PermissionError instead of reading
        as gone: maps and environ of another user's process need ptrace read access (CAP_SYS_PTRACE)."""
        try:
            os.close(os.open(self.path(pid, name), os.O_RDONLY | os.O_CLOEXEC))
        except PermissionError:
            raise
        except OSError:
            return None
        return self.read_bytes(pid, name, limit)

    def readlink(self, pid: int | str, name: str) -> str | None:
        """The target of the link /proc/PID/NAME (exe, cwd, …) decoded by the policy above; None when unreadable."""
        try:
            return decode(os.readlink(os.fsencode(self.path(pid, name))))
        except OSError:
            return None

    def read_text(self, pid: int | str, name: str, limit: int = MAX_FILE) -> str | None:
        """/proc/PID/NAME decoded by the policy above; None when gone."""
        raw = self.read_bytes(pid, name, limit)
        return None if raw is None else decode(raw)

    def read_root_text(self, name: str, limit: int = MAX_FILE) -> str | None:
        """A file at the top of /proc (stat, mounts, …) decoded by the policy above; None when unreadable."""
        return self.read_text("", name, limit) if name else None

    def comm(self, pid: int | str) -> str | None:
        """The process's command name (at most 15 bytes, set by the process itself: untrusted)."""
        text = self.read_text(pid, "comm", SMALL_FILE)
        if text is None:
            return None
        return text[:-1] if text.endswith("\n") else text  # the kernel's newline only: the name may end in its own

    def pids(self) -> Iterator[int]:
        """Pids of the processes alive now (a process may be gone by the time it is read)."""
        try:
            entries = os.listdir(self.root)
        except OSError:
            return
        for entry in entries:
            if entry.isdigit():
                yield int(entry)

    def tids(self, pid: int | str) -> list[int]:
        """Thread ids of *pid*; empty when it is gone."""
        try:
            return [int(entry) for entry in os.listdir(self.path(pid, "task")) if entry.isdigit()]
        except OSError:
            return []
