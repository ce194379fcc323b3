"""Addresses of samples and call sites to code names (library, its version, function), with the caches that make a
scrape cheap: a process's maps read again only when they may have changed, a file's functions once per build id and
only when an address in it is named, kallsyms once; and the maps of processes captured when first seen (their files
held open, not read), for those that exit before a round reads them."""

from __future__ import annotations

import ctypes
import io
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.machine.process_stat import read_process_stat
from agent.machine.procfs import ProcFS, printable
from agent.symbols.elf_symbols import ElfFunctions, SymbolCache, read_functions
from agent.symbols.kernel_symbols import KernelSymbols, read_kallsyms
from agent.symbols.names import KERNEL, UNKNOWN, library_name
from agent.symbols.process_maps import VDSO, ExecutableMappings, Mapping, read_maps

# The C library's system-call stubs: leaf functions that push nothing, so the word at the stack pointer at the
# system call is the return address into their caller (glibc, musl).
LEAF_STUBS = frozenset({"sched_yield", "syscall"})
FILES_REMEMBERED = 4096  # (device, inode) -> functions and version, for processes that have exited since
ROUNDS_REMEMBERED = 60  # a process's maps are kept this many rounds after it was last looked at (it may have exited)
MAPS_REFRESH_ROUNDS = 60  # a process's maps are read again at least this often (a library swapped at one address)
CAPTURED_PROCESSES = 1024  # processes whose maps were captured when first seen, the oldest forgotten first
HELD_FILES = 256  # files of captured processes held open until an address in them is named, the oldest closed first

VersionReader = Callable[[str, Path], str | None]  # (file name, path to open it) -> the version the library says


@dataclass(frozen=True)
class CodeName:
    """Where an address is: library (``[kernel]``, ``(unknown)``), the library's version ("" unknown), function
    (``(unknown)`` where no symbol covers it)."""

    library: str
    version: str
    function: str


UNKNOWN_CODE = CodeName(UNKNOWN, "", UNKNOWN)


@dataclass
class _File:
    library: str
    version: str
    functions: ElfFunctions | None


@dataclass
class _Maps:
    """A process's maps as last read, which process it was then, and when."""

    mappings: ExecutableMappings
    process: tuple[int, int, int] | None  # its executable's device and inode, its start time; None: unreadable
    read_in: int  # the round they were read in
    used_in: int  # the last round they were used in
    checked_in: int  # the last round the process was compared


class Symbolizer:
    """Names addresses of processes and of the kernel. Call :meth:`next_round` at each read (a tick or a scrape).

    A process's maps are read once and again only when they may have changed: at its first address of a round after
    it executed another program (the target of /proc/PID/exe moved: one stat) or its pid went to another process
    (another start time in /proc/PID/stat: pids wrap at pid_max, 32,768 by default), for an address none of its kept
    mappings holds (a library loaded since: dlopen, once per round), and at least every MAPS_REFRESH_ROUNDS rounds
    (a library unloaded and another mapped at the same addresses). Reading and parsing maps at every 1 s tick for
    every sampled process was most of the code collectors' cost between scrapes. :meth:`capture` reads a process's
    maps at once, from any thread, and holds its files open, so that it is named after it exits; a file's functions are
    read only when an address in it is named (the busiest workloads' sites and samples), which most files of most
    processes never are. Call :meth:`close` to let the files held go.
    """

    def __init__(
        self,
        procfs: ProcFS | None = None,
        cache: SymbolCache | None = None,
        version_of: VersionReader | None = None,
        kernel_symbols: Callable[[], KernelSymbols] | None = None,
    ) -> None:
        self._proc = procfs or ProcFS()
        self._cache = cache or SymbolCache()
        self._version_of = version_of
        self._read_kernel_symbols = kernel_symbols or (lambda: read_kallsyms(self._proc))
        self._kernel: KernelSymbols | None = None
        self._round = 0
        self._maps: dict[int, _Maps] = {}
        self._files: dict[tuple[tuple[int, int], int], _File] = {}
        self._vdso: _File | None = None
        self._captured: OrderedDict[int, ExecutableMappings] = OrderedDict()  # pid -> maps when first seen
        self._held: OrderedDict[tuple[tuple[int, int], int], int] = OrderedDict()  # file -> descriptor, not yet read
        self._lock = threading.Lock()  # capture() runs on a listener's thread

    def next_round(self) -> None:
        """Start a round: each process's executable is checked again at its first use, and the maps of processes
        unused for ROUNDS_REMEMBERED rounds are forgotten."""
        with self._lock:
            self._round += 1
            self._maps = {
                pid: kept for pid, kept in self._maps.items() if self._round - kept.used_in <= ROUNDS_REMEMBERED
            }

    def capture(self, pid: int) -> bool:
        """Read the maps of process *pid* now and hold open each file it maps that is not known yet (the HELD_FILES
        last), so that its addresses are named after it exits (until CAPTURED_PROCESSES later ones were captured);
        whether it was still there. No file is read: its functions are read when an address in it is first named."""
        maps = read_maps(self._proc, pid)
        if maps is None:
            return False
        opened = self._open_files(pid, maps)
        with self._lock:
            self._maps.pop(pid, None)  # an earlier process's, if the pid was reused
            for key, descriptor in opened.items():
                if key in self._files or key in self._held:  # another thread was first
                    os.close(descriptor)
                    continue
                self._held[key] = descriptor
            while len(self._held) > HELD_FILES:
                os.close(self._held.popitem(last=False)[1])
            self._captured[pid] = maps
            self._captured.move_to_end(pid)
            if len(self._captured) > CAPTURED_PROCESSES:
                self._captured.popitem(last=False)
        return True

    def close(self) -> None:
        """Close the files held for captured processes (their addresses named afterwards are read from /proc)."""
        with self._lock:
            while self._held:
                os.close(self._held.popitem()[1])

    def _open_files(self, pid: int, maps: ExecutableMappings) -> dict[tuple[tuple[int, int], int], int]:
        """A descriptor of each file process *pid* maps that is not known yet, by (device, inode)."""
        held: dict[tuple[tuple[int, int], int], int] = {}
        for mapping in maps.all():
            key = (mapping.device, mapping.inode)
            if mapping.path == VDSO or key in held or key in self._files or key in self._held:
                continue
            for path in self._paths(pid, mapping):
                try:
                    held[key] = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                    break
                except OSError:
                    continue
        return held

    def kernel(self, address: int) -> CodeName:
        """The kernel function at *address*."""
        if self._kernel is None:
            self._kernel = self._read_kernel_symbols()
        return CodeName(KERNEL, "", self._kernel.function_at(address) or UNKNOWN)

    def user(self, pid: int, address: int) -> CodeName:
        """The library and function at *address* of process *pid*."""
        with self._lock:
            return self._user(pid, address)

    def _user(self, pid: int, address: int) -> CodeName:
        maps = self._mappings(pid, address)
        mapping = None if maps is None else maps.find(address)
        if mapping is None:
            return UNKNOWN_CODE
        known = self._file(pid, mapping)
        function = None if known.functions is None else known.functions.function_at(mapping.file_offset(address))
        return CodeName(known.library, known.version, function or UNKNOWN)

    def call_site(self, pid: int, ip: int, caller: int) -> CodeName:
        """Who made a system call: the caller of the C library's stub when the call was made from one (*caller*:
        the return address read at the stub's stack pointer, 0 when not read), else the code at *ip* itself."""
        made_in = self.user(pid, ip)
        if caller and made_in.function in LEAF_STUBS:
            return self.user(pid, caller - 1)  # the call instruction, before the return address
        return made_in

    def _mappings(self, pid: int, address: int) -> ExecutableMappings | None:
        kept = self._maps.get(pid)
        if kept is not None and not self._stale(pid, kept, address):
            kept.used_in = self._round
            return kept.mappings
        fresh = read_maps(self._proc, pid)
        if fresh is None:  # gone: what it mapped when last read, or when first seen
            if kept is None:
                return self._captured.get(pid)
            kept.used_in = kept.checked_in = self._round
            return kept.mappings
        self._maps[pid] = _Maps(fresh, self._process(pid), self._round, self._round, self._round)
        return fresh

    def _stale(self, pid: int, kept: _Maps, address: int) -> bool:
        """Whether *pid*'s kept maps may no longer be its own (read them again)."""
        if kept.read_in == self._round:
            return False
        if self._round - kept.read_in >= MAPS_REFRESH_ROUNDS or kept.mappings.find(address) is None:
            return True
        if kept.checked_in != self._round:
            kept.checked_in = self._round
            if self._process(pid) != kept.process:
                return True
        return False

    def _process(self, pid: int) -> tuple[int, int, int] | None:
        """Which process *pid* is: its executable file (an exec changes it) and its start time (a reused pid's
        differs, though it may run the same program)."""
        stat = read_process_stat(self._proc, pid)
        try:
            found = os.stat(self._proc.path(pid, "exe"))
        except OSError:
            return None
        return None if stat is None else (found.st_dev, found.st_ino, stat.start_ticks)

    def _paths(self, pid: int, mapping: Mapping) -> tuple[Path, Path]:
        """Where the file of *mapping* opens: map_files names the very file mapped but needs CAP_SYS_ADMIN (or
        CHECKPOINT_RESTORE); the path in the process's own root needs only the ptrace read check (CAP_PERFMON passes
        it: docs/security.md)."""
        opened = self._proc.path(pid, f"map_files/{mapping.start:x}-{mapping.end:x}")
        return opened, self._proc.path(pid, "root") / mapping.path.lstrip("/")

    def _file(self, pid: int, mapping: Mapping) -> _File:
        """What is known of the file of *mapping*: read at its first use, from the descriptor held since its process
        was captured where there is one."""
        if mapping.path == VDSO:
            if self._vdso is None:
                self._vdso = _File(VDSO, "", own_vdso(self._proc))
            return self._vdso
        key = (mapping.device, mapping.inode)
        known = self._files.get(key)
        if known is not None:
            return known
        descriptor = self._held.pop(key, None)
        if descriptor is None:
            return self._remember(key, self._describe(pid, mapping, None))
        try:
            return self._remember(key, self._describe(pid, mapping, Path(f"/proc/self/fd/{descriptor}")))
        finally:
            os.close(descriptor)

    def _describe(self, pid: int, mapping: Mapping, held: Path | None) -> _File:
        """The library, version and functions of the file of *mapping* (*held*: a path of a descriptor open on it)."""
        opened, in_root = self._paths(pid, mapping) if held is None else (held, held)
        basename = mapping.path.rsplit("/", 1)[-1]
        version = self._version_of(basename, opened) if self._version_of is not None else None
        functions = self._cache.functions(opened, in_root)
        return _File(printable(library_name(mapping.path)), printable(version or ""), functions)

    def _remember(self, key: tuple[tuple[int, int], int], known: _File) -> _File:
        """Keep *known* as the file of *key* (the oldest forgotten past FILES_REMEMBERED)."""
        if len(self._files) >= FILES_REMEMBERED:
            self._files.pop(next(iter(self._files)))
        self._files[key] = known
        return known


def own_vdso(procfs: ProcFS) -> ElfFunctions | None:
    """The functions of this process's vDSO: the kernel maps the same image into every process of an architecture,
    so its own copy names another process's vDSO addresses without reading that process's memory."""
    maps = read_maps(procfs, os.getpid())
    mapping = next((m for m in maps.all() if m.path == VDSO), None) if maps is not None else None
    if mapping is None:
        return None
    image = ctypes.string_at(mapping.start, mapping.end - mapping.start)
    return read_functions(io.BytesIO(image))
