"""What every BPF probe shares: its loaded program, bounded maps, drop counters and cleanup."""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from agent.bpf import handover
from agent.bpf.maps import BpfMap
from agent.bpf.ringbuf import RingBuffer
from agent.bpf.stats import ProgramStats, program_stats
from agent.machine import kernel

# How long the announcement listener waits per poll: a scrape that drains the ring waits at most this long for it.
ANNOUNCEMENT_POLL_MS = 20
DRAIN_TIMEOUT_SECONDS = 0.2  # a scrape never waits longer than this for the listener


MOVE_PATH_MAX = 256  # bpf/schedwatch.h


class _Announcement(ctypes.Structure):
    """struct announcement of bpf/schedwatch.h: a new process key."""

    _fields_ = [
        ("tgid", ctypes.c_uint32),
        ("parent", ctypes.c_uint32),
        ("boot_ns", ctypes.c_uint64),
        ("forked_ns", ctypes.c_uint64),
    ]


class _MoveAnnouncement(ctypes.Structure):
    """struct move_announcement of bpf/schedwatch.h: a process moved in the placing hierarchy."""

    _fields_ = [
        ("tgid", ctypes.c_uint32),
        ("path_len", ctypes.c_uint32),
        ("boot_ns", ctypes.c_uint64),
        ("path", ctypes.c_char * MOVE_PATH_MAX),
    ]


class AnnouncementSink(Protocol):
    """What takes a program's announcements (agent.identity.placement.ProcessKeys)."""

    def announce(self, pid: int, boot_ns: int, parent: int = 0, forked_ns: int = 0) -> None:
        """A new process key: its pid, when it was first seen, the process that forked it and when (0: unknown)."""

    def moved(self, pid: int, path: bytes | None, boot_ns: int = 0) -> None:
        """Process *pid* moved (at *boot_ns*) to cgroup *path* of the placing hierarchy (None: the path was too long
        to carry)."""


@dataclass(frozen=True)
class MapHealth:
    """Fill level and capacity of each bounded map, and events dropped because one was full."""

    entries: dict[str, int]
    capacity: dict[str, int]
    drops: dict[str, int]


@dataclass(frozen=True)
class ProbeLimits:
    """Bounds of a probe's maps: every map is sized at load time and never grows."""

    max_cgroups: int = 4096
    max_processes: int = 0  # 0 turns per-process accounting off in the kernel
    max_threads: int = 65536
    pid_namespace: tuple[int, int] | None = None  # (st_dev, st_ino) of a pid namespace to watch alone
    key_by_process: bool = False  # per-workload maps keyed by process (hosts without cgroup2)
    place_hierarchy: int = -1  # keyed by process: the hierarchy id whose moves are announced (-1: none)


def common_defines(limits: ProbeLimits, tracefs: Path | None) -> dict[str, str | int | None]:
    """Map sizes, and whether sched_process_exit says when a thread group dies."""
    defines: dict[str, str | int | None] = {
        "MAX_CGROUPS": limits.max_cgroups,
        "MAX_PROCESSES": limits.max_processes,
        "MAX_THREADS": limits.max_threads,
    }
    if "group_dead" in (kernel.tracepoint_fields("sched", "sched_process_exit", tracefs) or frozenset()):
        defines["HAVE_GROUP_DEAD"] = None
    if limits.pid_namespace is not None:
        defines["PIDNS_DEV"], defines["PIDNS_INO"] = (f"{n}ULL" for n in limits.pid_namespace)
    if limits.key_by_process:
        defines["KEY_BY_PROCESS"] = None
        defines["PLACE_HIERARCHY"] = limits.place_hierarchy
    return defines


Decoded = TypeVar("Decoded")


class DecodedEntries(Generic[Decoded]):
    """A map's entries, decoded; an entry whose bytes did not change since the last read is its last decoding
    again (the same object), so what is made of it downstream can be reused too."""

    def __init__(self, decode: Callable[[Any], Decoded]) -> None:
        self._decode = decode
        self._last: dict[Any, tuple[bytes, Decoded]] = {}

    def read_keys(self, table: BpfMap, keys: Iterable[Any]) -> dict[Any, Decoded]:
        """The entries of *keys* still in *table*, read now (one lookup each) and decoded afresh."""
        found = {}
        for key in keys:
            value = table.get(key)
            if value is not None:
                found[key] = self._decode(value)
        return found

    def decode_raw(self, entries: dict[Any, bytes], kind: Any) -> dict[Any, Decoded]:
        """*entries* (the bytes of values of ctypes type *kind*, by key), decoded afresh."""
        return {key: self._decode(kind.from_buffer_copy(raw)) for key, raw in entries.items()}

    def read_raw(self, entries: dict[Any, bytes], kind: Any) -> dict[Any, Decoded]:
        """Every entry of *entries* (the bytes of values of ctypes type *kind*, by key), as :meth:`read` decodes a
        map's: a value whose bytes did not change since the last read is its last decoding again."""
        last, kept, decoded = self._last, {}, {}
        for key, raw in entries.items():
            known = last.get(key)
            if known is None or known[0] != raw:
                known = (raw, self._decode(kind.from_buffer_copy(raw)))
            kept[key] = known
            decoded[key] = known[1]
        self._last = kept
        return decoded

    def read(self, table: BpfMap) -> dict[Any, Decoded]:
        """Every entry of *table* now, by key."""
        return self.read_raw({key: bytes(value) for key, value in table.items()}, table.Leaf)


class BpfProbe:
    """A compiled, attached BPF program with a per-workload `cgroups` map and a `drops` array.

    The program is compiled, loaded and attached by a short-lived child process (agent.bpf.handover):
    this process holds only its maps, programs and attachments as fds, reads the maps with bpf(2) and never
    imports bcc, whose compiler would otherwise stay resident.

    Keyed by process (KEY_BY_PROCESS), the program also announces each new process, and each move of a process
    to another cgroup, on its `new_processes` ring: :meth:`announce_to` hands them to a sink from a thread of its
    own.
    """

    source: ClassVar[str]
    drop_maps: ClassVar[tuple[str, ...]]  # names of the enum drop_reason slots, in order

    # Counting a map's entries reads it whole: on a node with tens of thousands of threads that is too much for
    # every scrape, so fill levels are refreshed at most this often.
    ENTRY_COUNT_SECONDS = 30.0

    def __init__(self, defines: dict[str, str | int | None], decode_cgroup: Callable[[Any], Any]) -> None:
        """*decode_cgroup*: a `cgroups` map value (ctypes) to the subclass's snapshot of one workload."""
        self._cgroups = DecodedEntries(decode_cgroup)
        self._program = handover.load(self.source, defines)
        self._ring: RingBuffer | None = None
        self._entries: dict[str, int] = {}
        self._entries_at = -self.ENTRY_COUNT_SECONDS
        self._listener: threading.Thread | None = None
        self._closing = threading.Event()
        # Only the listener thread consumes the ring (one consumer at a time): a scrape asks it to drain.
        self._drain_wanted = threading.Event()
        self._drained = threading.Event()

    def announce_to(self, sink: AnnouncementSink) -> None:
        """Hand *sink* each new process and each move the program announces (KEY_BY_PROCESS)."""

        def on_record(record: bytes) -> None:
            if len(record) == ctypes.sizeof(_Announcement):
                news = _Announcement.from_buffer_copy(record)
                sink.announce(news.tgid, news.boot_ns, news.parent, news.forked_ns)
            elif len(record) == ctypes.sizeof(_MoveAnnouncement):
                move = _MoveAnnouncement.from_buffer_copy(record)
                length = move.path_len
                path = bytes(move.path)[: length - 1] if 0 < length <= MOVE_PATH_MAX else None
                sink.moved(move.tgid, path, move.boot_ns)

        ring_map = self._program.maps["new_processes"]
        ring = self._ring = RingBuffer(ring_map.fd, ring_map.max_entries, on_record)

        def poll() -> None:
            while not self._closing.is_set():
                ring.poll(ANNOUNCEMENT_POLL_MS)
                if self._drain_wanted.is_set():
                    self._drain_wanted.clear()
                    ring.consume()
                    self._drained.set()

        self._listener = threading.Thread(target=poll, name=f"{self.source}-announcements", daemon=True)
        self._listener.start()

    def table(self, name: str) -> BpfMap:
        """A map of the program, by name."""
        return self._program.maps[name]

    def cgroup_entries(self) -> dict[int, Any]:
        """Every `cgroups` entry, decoded (an unchanged one is its last decoding again)."""
        return self._cgroups.read(self.table("cgroups"))

    def read_cgroups(self, keys: Iterable[int]) -> dict[int, Any]:
        """The `cgroups` entries of *keys* still there, read now."""
        return self._cgroups.read_keys(self.table("cgroups"), keys)

    def health(self, capacity: dict[str, int]) -> MapHealth:
        """Entries of each map named in *capacity* (refreshed every ENTRY_COUNT_SECONDS), and the drop counters."""
        now = time.monotonic()
        if now - self._entries_at >= self.ENTRY_COUNT_SECONDS or capacity.keys() != self._entries.keys():
            self._entries = {name: self.table(name).count() for name in capacity}
            self._entries_at = now
        entries = dict(self._entries)
        drops_table = self.table("drops")
        drops = {name: drops_table.get(index) or 0 for index, name in enumerate(self.drop_maps)}
        return MapHealth(entries, capacity, drops)

    def forget_cgroups(self, cgroup_ids: Iterable[int]) -> None:
        """Delete the entries of removed cgroups (after their last values were read)."""
        self.table("cgroups").delete(cgroup_ids)

    def program_stats(self) -> list[ProgramStats]:
        """Kernel accounting of each attached program."""
        return program_stats(self._program.programs)

    def request_drain(self) -> None:
        """Ask the listener to hand every announcement in the ring to the callback (see :meth:`wait_drained`)."""
        if self._listener is not None and self._listener.is_alive():
            self._drained.clear()
            self._drain_wanted.set()

    def wait_drained(self, timeout: float = DRAIN_TIMEOUT_SECONDS) -> None:
        """Until the listener has drained the ring (one poll interval), or *timeout*; at once if it is gone."""
        if self._listener is not None and self._listener.is_alive():
            self._drained.wait(timeout)

    def close(self) -> None:
        """Detach every program and free the maps."""
        self._closing.set()
        if self._listener is not None:
            self._listener.join(timeout=5)
        if self._ring is not None and (self._listener is None or not self._listener.is_alive()):
            self._ring.close()
        self._program.close()
