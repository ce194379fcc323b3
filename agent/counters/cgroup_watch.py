"""New cgroup directories as they are made (inotify), so that their perf counters open before their tasks start.

One inotify watch per directory of the tree (bounded); a directory made under a watched one is reported from a
thread of the watcher's own, then watched in turn, with the directories made inside it before its watch was
added. Without inotify (or past the bound) new cgroups are still found by the walk at each scrape.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import threading
from collections.abc import Callable
from pathlib import Path

from agent.log import get_logger

_IN_CREATE = 0x100
_IN_ISDIR = 0x40000000
_IN_IGNORED = 0x8000
_IN_Q_OVERFLOW = 0x4000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")
POLL_SECONDS = 0.5  # how soon close() is noticed

log = get_logger("cgroup_watch")
_libc = ctypes.CDLL(None, use_errno=True)


class CgroupWatcher:
    """Calls *on_new* with the path (relative to *root*, '/a/b') of each directory made under *root*."""

    def __init__(self, root: Path, on_new: Callable[[str], None], max_watches: int) -> None:
        self._root = root
        self._on_new = on_new
        self._max_watches = max_watches
        self._paths: dict[int, str] = {}  # watch descriptor -> relative path
        self._full_logged = False
        self._closing = threading.Event()
        self._fd = int(_libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if self._fd < 0:
            number = ctypes.get_errno()
            raise OSError(number, f"inotify_init1: {os.strerror(number)}")
        self._watch_tree("/", report=False)
        self._thread = threading.Thread(target=self._run, name="cgroup-watch", daemon=True)
        self._thread.start()

    @property
    def watches(self) -> int:
        """Directories watched now."""
        return len(self._paths)

    def close(self) -> None:
        """Stop watching."""
        self._closing.set()
        self._thread.join(timeout=5)
        os.close(self._fd)

    def _run(self) -> None:
        while not self._closing.is_set():
            readable, _, _ = select.select([self._fd], [], [], POLL_SECONDS)
            if not readable:
                continue
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                continue
            offset = 0
            while offset + _EVENT.size <= len(data):
                watch, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & _IN_IGNORED:
                    self._paths.pop(watch, None)
                elif mask & _IN_CREATE and mask & _IN_ISDIR and watch in self._paths:
                    parent = self._paths[watch]
                    self._watch_tree(f"{parent.rstrip('/')}/{os.fsdecode(name)}", report=True)
                elif mask & _IN_Q_OVERFLOW:
                    log.warning("cgroup_watch_overflow", consequence="some new cgroups get counters at the next scrape")

    def _watch_tree(self, relative: str, report: bool) -> None:
        """Watch *relative* and every directory below it; report each (made after the walk began) when asked."""
        pending = [relative]
        while pending:
            path = pending.pop()
            if report:
                try:
                    self._on_new(path)
                except Exception:  # a counter that cannot open is counted by the source; the watch goes on
                    log.exception("cgroup_watch_callback_failed", cgroup=path)
            if not self._add_watch(path):
                continue
            try:
                with os.scandir(f"{self._root}{path}") as entries:
                    names = [entry.name for entry in entries if entry.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            pending.extend(f"{path.rstrip('/')}/{name}" for name in names)

    def _add_watch(self, relative: str) -> bool:
        if len(self._paths) >= self._max_watches:
            if not self._full_logged:
                self._full_logged = True
                log.warning("cgroup_watch_full", watches=len(self._paths), fix="raise --max-cgroups")
            return False
        watch = int(_libc.inotify_add_watch(self._fd, os.fsencode(f"{self._root}{relative}"), _IN_CREATE))
        if watch < 0:
            number = ctypes.get_errno()
            if number == errno.ENOSPC and not self._full_logged:
                self._full_logged = True
                log.warning("cgroup_watch_full", fix="raise sysctl fs.inotify.max_user_watches")
            return False
        self._paths[watch] = relative
        return True
