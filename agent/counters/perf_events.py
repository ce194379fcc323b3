"""Counting perf events on tracepoints, per CPU and cgroup, through perf_event_open(2) (no BPF).

A counting event costs the kernel one increment per matching tracepoint hit; nothing is sampled or sent to user
space. With PERF_FLAG_PID_CGROUP the event counts only while a task of the given cgroup (or of a cgroup below it,
on kernels >= 4.11 and on cgroup2) runs on the given CPU. A tracepoint filter (PERF_EVENT_IOC_SET_FILTER) makes
the kernel count only the hits whose fields match it. Events opened into one group (same CPU and cgroup) are
read together, in one read(2) of the group leader.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_PERF_TYPE_TRACEPOINT = 2
_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7; older kernels accept larger structs whose tail is zero
_FLAG_DISABLED = 1  # first bit of the attr's flag word
_FORMAT_GROUP = 8  # PERF_FORMAT_GROUP: a read of the leader gives every member's count
_PERF_FLAG_PID_CGROUP = 4
_PERF_FLAG_FD_CLOEXEC = 8
_IOC_ENABLE = 0x2400  # _IO('$', 0)
_IOC_SET_FILTER = 0x40082406  # _IOW('$', 6, char *)

_libc = ctypes.CDLL(None, use_errno=True)


class PerfEventError(OSError):
    """perf_event_open or one of its ioctls was refused; ``errno`` says why."""


def tracepoint_id(tracefs: Path, category: str, event: str) -> int | None:
    """The id of tracepoint *category*:*event* (tracefs events/.../id), None when this kernel lacks it."""
    try:
        return int((tracefs / "events" / category / event / "id").read_text())
    except (OSError, ValueError):
        return None


def open_cgroup_counter(
    tracepoint: int, cgroup_fd: int, cpu: int, event_filter: str | None = None, group_fd: int = -1
) -> int:
    """A counter of *tracepoint* hits by tasks of the cgroup open at *cgroup_fd* on *cpu*; returns its fd.

    With *group_fd* (a counter of the same cgroup and CPU) it joins that counter's group: read_group() of the
    leader reads it too. The event is opened disabled, given its filter, then enabled, so it never counts an
    unfiltered hit. Raises PerfEventError (with errno) when the kernel refuses any step.
    """
    number = _PERF_EVENT_OPEN.get(os.uname().machine)
    if number is None:
        raise PerfEventError(errno.ENOSYS, f"perf_event_open: unknown syscall number on {os.uname().machine}")
    attr = (ctypes.c_uint8 * _ATTR_SIZE)()
    ctypes.c_uint32.from_buffer(attr, 0).value = _PERF_TYPE_TRACEPOINT
    ctypes.c_uint32.from_buffer(attr, 4).value = _ATTR_SIZE
    ctypes.c_uint64.from_buffer(attr, 8).value = tracepoint
    ctypes.c_uint64.from_buffer(attr, 32).value = _FORMAT_GROUP  # read_format
    ctypes.c_uint64.from_buffer(attr, 40).value = _FLAG_DISABLED
    flags = _PERF_FLAG_PID_CGROUP | _PERF_FLAG_FD_CLOEXEC
    fd = int(_libc.syscall(number, ctypes.byref(attr), cgroup_fd, cpu, group_fd, flags))
    if fd < 0:
        raise _error("perf_event_open")
    try:
        if event_filter is not None:
            text = ctypes.create_string_buffer(event_filter.encode())
            if _libc.ioctl(fd, ctypes.c_ulong(_IOC_SET_FILTER), text) < 0:
                raise _error("PERF_EVENT_IOC_SET_FILTER")
        if _libc.ioctl(fd, ctypes.c_ulong(_IOC_ENABLE), 0) < 0:
            raise _error("PERF_EVENT_IOC_ENABLE")
    except PerfEventError:
        os.close(fd)
        raise
    return fd


def read_group(leader_fd: int, members: int) -> list[int]:
    """The counts now of the *members* counters of a group (the leader first, then in the order they joined)."""
    data = os.read(leader_fd, 8 * (1 + members))  # u64 nr, then nr u64 values
    found = int.from_bytes(data[:8], "little")
    if found != members:
        raise PerfEventError(errno.EIO, f"perf group read gave {found} counts, not {members}")
    return [int.from_bytes(data[8 * i : 8 * i + 8], "little") for i in range(1, 1 + members)]


def equality_filter(field: str, values: tuple[int, ...]) -> str:
    """A tracepoint filter matching *field* equal to any of *values*: 'op == 0 || op == 128 || ...'.

    Kernels accept equality lists but refuse bit tests such as 'op & 127' in perf filters.
    """
    return " || ".join(f"{field} == {value}" for value in values)


def inequality_filter(field: str, values: tuple[int, ...]) -> str:
    """A tracepoint filter matching *field* equal to none of *values*."""
    return " && ".join(f"{field} != {value}" for value in values)


def _error(what: str) -> PerfEventError:
    number = ctypes.get_errno()
    return PerfEventError(number, f"{what}: {errno.errorcode.get(number, str(number))} ({os.strerror(number)})")
