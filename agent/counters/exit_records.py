"""taskstats exit records over generic netlink: each exiting thread's final run-queue wait and CPU time.

Registered for every CPU, the kernel sends one record per exiting thread (TASKSTATS_TYPE_AGGR_PID) to this
socket, before the thread leaves its cgroup. The socket is read without blocking at scrape time; records that
did not fit in its buffer are lost (the kernel reports ENOBUFS), and their threads end up counted as exits
without a record (agent.counters.schedstat).
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from dataclasses import dataclass

_NETLINK_GENERIC = 16
_NLM_F_REQUEST = 1
_NLM_F_ACK = 4
_NLMSG_ERROR = 2
_TASKSTATS_CMD_GET = 1
_TASKSTATS_CMD_ATTR_REGISTER_CPUMASK = 3
_RECEIVE_BUFFER = 8 << 20  # about 20,000 exit records between two scrapes
_SO_RCVBUFFORCE = 33


@dataclass(frozen=True)
class ExitRecord:
    """A thread's totals when it exited."""

    tid: int
    tgid: int  # 0 when the kernel's record has no tgid
    run_ns: int  # se.sum_exec_runtime, as field 1 of /proc/PID/task/TID/schedstat
    wait_ns: int  # sched_info.run_delay, as field 2


class ExitRecords:
    """A netlink socket registered for the exit records of every CPU."""

    def __init__(self, cpus: str) -> None:
        from pyroute2 import TaskStats

        with TaskStats() as resolver:  # the generic netlink family id of TASKSTATS
            resolver.bind()
            self._family = int(resolver.prid)
        self._socket = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_GENERIC)
        try:
            try:
                self._socket.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, _RECEIVE_BUFFER)
            except OSError:
                self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER)
            self._socket.bind((0, 0))
            self._socket.settimeout(1.0)
            self._socket.send(self._register(cpus))
            self._check_ack(self._socket.recv(1 << 16))
            self._socket.setblocking(False)
        except OSError:
            self._socket.close()
            raise

    def _register(self, cpus: str) -> bytes:
        text = cpus.encode() + b"\0"
        attribute = struct.pack("HH", 4 + len(text), _TASKSTATS_CMD_ATTR_REGISTER_CPUMASK) + text
        attribute += b"\0" * (-len(attribute) % 4)
        body = struct.pack("BBH", _TASKSTATS_CMD_GET, 1, 0) + attribute
        flags = _NLM_F_REQUEST | _NLM_F_ACK
        return struct.pack("IHHII", 16 + len(body), self._family, flags, 1, 0) + body

    @staticmethod
    def _check_ack(data: bytes) -> None:
        """Raise the kernel's refusal of the registration (e.g. EPERM without CAP_NET_ADMIN)."""
        if len(data) >= 20 and struct.unpack_from("H", data, 4)[0] == _NLMSG_ERROR:
            (code,) = struct.unpack_from("i", data, 16)
            if code < 0:
                raise OSError(-code, f"taskstats registration: {os.strerror(-code)}")

    def drain(self) -> list[ExitRecord]:
        """Every record received since the last drain."""
        records: list[ExitRecord] = []
        while True:
            try:
                data = self._socket.recv(1 << 16)
            except BlockingIOError:
                return records
            except OSError as error:
                if error.errno == errno.ENOBUFS:  # some were dropped: read on past the gap
                    continue
                raise
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("IH", data, offset)
                if length < 16:
                    break
                if kind == self._family:
                    record = parse_message(data[offset : offset + length])
                    if record is not None:
                        records.append(record)
                offset += _aligned(length)

    def close(self) -> None:
        """Close the socket (the kernel unregisters it)."""
        self._socket.close()


# struct taskstats (include/uapi/linux/taskstats.h): offsets of the fields read. ac_tgid is there in records of
# version 16 (this kernel; checked against threads of a known thread group), absent from shorter, older ones.
_CPU_DELAY_TOTAL = 24  # sched_info.run_delay, as schedstat's field 2
_CPU_RUN_VIRTUAL_TOTAL = 72  # se.sum_exec_runtime, as schedstat's field 1
_AC_TGID = 368
_TASKSTATS_TYPE_PID = 1
_TASKSTATS_TYPE_STATS = 3
_TASKSTATS_TYPE_AGGR_PID = 4


def _aligned(length: int) -> int:
    return (length + 3) & ~3


def _attributes(data: bytes, start: int, end: int) -> dict[int, bytes]:
    """Netlink attributes (type -> payload) between *start* and *end*."""
    found: dict[int, bytes] = {}
    while start + 4 <= end:
        length, kind = struct.unpack_from("HH", data, start)
        if length < 4:
            break
        found[kind & 0x3FFF] = data[start + 4 : start + length]
        start += _aligned(length)
    return found


def parse_message(message: bytes) -> ExitRecord | None:
    """A thread's exit record from one netlink message (nlmsghdr, genlmsghdr, attributes); None for others.

    A whole thread group's record (TASKSTATS_TYPE_AGGR_TGID) is skipped: its threads' records came already.
    """
    aggregate = _attributes(message, 20, len(message)).get(_TASKSTATS_TYPE_AGGR_PID)
    if aggregate is None:
        return None
    inner = _attributes(aggregate, 0, len(aggregate))
    pid, stats = inner.get(_TASKSTATS_TYPE_PID), inner.get(_TASKSTATS_TYPE_STATS)
    if pid is None or len(pid) < 4 or stats is None or len(stats) < _CPU_RUN_VIRTUAL_TOTAL + 8:
        return None
    tgid = struct.unpack_from("I", stats, _AC_TGID)[0] if len(stats) >= _AC_TGID + 4 else 0
    return ExitRecord(
        tid=struct.unpack_from("I", pid)[0],
        tgid=tgid,
        run_ns=struct.unpack_from("Q", stats, _CPU_RUN_VIRTUAL_TOTAL)[0],
        wait_ns=struct.unpack_from("Q", stats, _CPU_DELAY_TOTAL)[0],
    )


def cpu_mask_text() -> str:
    """Every possible CPU, as the kernel's list format ('0-1')."""
    try:
        with open("/sys/devices/system/cpu/possible") as possible:
            return possible.read().strip()
    except OSError:
        return f"0-{(os.cpu_count() or 1) - 1}"
