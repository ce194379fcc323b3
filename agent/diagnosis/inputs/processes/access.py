"""Reading the private files of a process (maps, environ), which the kernel shows only with ptrace read access."""

from __future__ import annotations

from enum import Enum

from agent.machine.procfs import ProcFS


class Access(Enum):
    """Whether a private file of a process could be read."""

    READ = "read"
    NOT_PERMITTED = "not permitted"  # ptrace read access denied: another user's process without CAP_SYS_PTRACE
    GONE = "gone"  # the process exited


def read_private(procfs: ProcFS, pid: int | str, name: str, limit: int) -> tuple[Access, bytes | None]:
    """/proc/PID/NAME (at most *limit* bytes) and whether it could be read; the bytes are None unless READ."""
    try:
        raw = procfs.read_bytes_permitted(pid, name, limit)
    except PermissionError:
        return Access.NOT_PERMITTED, None
    if raw is None:
        return Access.GONE, None
    return Access.READ, raw
