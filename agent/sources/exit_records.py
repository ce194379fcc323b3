"""taskstats exit records over generic netlink: each exiting thread's final run-queue wait and CPU time.

Registered for every CPU, the kernel sends one record per exiting thread (TASKSTATS_TYPE_AGGR_PID) to this
socket, before the thread leaves its cgroup. The socket is read without blocking at scrape time; records that
did not fit in its buffer are counted (the kernel reports ENOBUFS).
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
        self.overflows = 0  # times the kernel dropped records because the buffer was full

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
        from pyroute2.netlink.taskstats import taskstatsmsg

        records: list[ExitRecord] = []
        while True:
            try:
                data = self._socket.recv(1 << 16)
            except BlockingIOError:
                return records
            except OSError as error:
                if error.errno == errno.ENOBUFS:
                    self.overflows += 1
                    continue
                raise
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("IH", data, offset)
                if length < 16:
                    break
                if kind == self._family:
                    record = _record(taskstatsmsg(data[offset : offset + length]))
                    if record is not None:
                        records.append(record)
                offset += (length + 3) & ~3

    def close(self) -> None:
        """Close the socket (the kernel unregisters it)."""
        self._socket.close()


def _record(message: object) -> ExitRecord | None:
    message.decode()  # type: ignore[attr-defined]
    aggregate = message.get_attr("TASKSTATS_TYPE_AGGR_PID")  # type: ignore[attr-defined]
    if aggregate is None:  # a whole thread group's record: its threads' records came already
        return None
    stats = aggregate.get_attr("TASKSTATS_TYPE_STATS")
    tid = aggregate.get_attr("TASKSTATS_TYPE_PID")
    if stats is None or tid is None:
        return None
    return ExitRecord(
        tid=int(tid),
        tgid=int(stats.get("ac_tgid") or 0),
        run_ns=int(stats["cpu_run_virtual_total"]),
        wait_ns=int(stats["cpu_delay_total"]),
    )


def cpu_mask_text() -> str:
    """Every possible CPU, as the kernel's list format ('0-1')."""
    try:
        with open("/sys/devices/system/cpu/possible") as possible:
            return possible.read().strip()
    except OSError:
        return f"0-{(os.cpu_count() or 1) - 1}"
