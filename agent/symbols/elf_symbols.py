"""The functions of an ELF file (an executable or a shared library), from its symbol table, searchable by file
offset; read with pyelftools, the symbol entries decoded in bulk.

``.symtab`` is used where the file has one (wheels' OpenBLAS keeps it: ``blas_thread_server`` is a local symbol),
``.dynsym`` otherwise (a stripped C library still names its exported functions). A file's functions are read once
per build id (:class:`SymbolCache`), so the workers of one pool, or two wheels shipping the same build, cost one read;
the build id is read first (the ELF and program headers and a note: no pyelftools), so a copy of a file already read
(the same library in another container's image, or another virtualenv) is not parsed again.
"""

from __future__ import annotations

import bisect
import os
import stat
import struct
import threading
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

SYMBOL_TABLE_LIMIT = 64 * 1024 * 1024  # bytes of symbol and string table read at most from one file
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
_FUNCTION_TYPES = frozenset({2, 10})  # STT_FUNC, STT_GNU_IFUNC
_UNDEFINED = 0  # SHN_UNDEF
_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # Elf64_Ehdr
_PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")  # Elf64_Phdr: type, flags, offset, vaddr, paddr, filesz, memsz, align
_NOTE_HEADER = struct.Struct("<III")  # namesz, descsz, type
_PT_NOTE = 4
_NT_GNU_BUILD_ID = 3
_NOTES_LIMIT = 64 * 1024  # bytes of one PT_NOTE segment read at most for the build id


@dataclass(frozen=True)
class _Segment:
    offset: int
    size: int
    address: int


class ElfFunctions:
    """The functions of one ELF file: name by file offset. Packed as kallsyms are (agent/symbols/kernel_symbols.py):
    starts and ends in arrays, the names in one string (a library as big as libLLVM names ~60,000 functions)."""

    def __init__(self, build_id: str | None, segments: list[_Segment], functions: list[tuple[int, int, str]]) -> None:
        self.build_id = build_id
        self._segments = segments
        functions.sort()
        self._starts = array("Q", [start for start, _end, _name in functions])
        self._ends = array("Q", [end for _start, end, _name in functions])
        self._names = "".join(name for _start, _end, name in functions)
        self._name_ends = array("L", [0])
        end = 0
        for _start, _end, name in functions:
            end += len(name)
            self._name_ends.append(end)

    def __len__(self) -> int:
        return len(self._starts)

    def function_at(self, file_offset: int) -> str | None:
        """The function whose code is at *file_offset* of the file, or None (no symbol covers it)."""
        address = self._address_of(file_offset)
        if address is None:
            return None
        index = bisect.bisect_right(self._starts, address) - 1
        if index < 0 or address >= self._ends[index]:
            return None
        return self._names[self._name_ends[index] : self._name_ends[index + 1]]

    def _address_of(self, file_offset: int) -> int | None:
        for segment in self._segments:
            if segment.offset <= file_offset < segment.offset + segment.size:
                return file_offset - segment.offset + segment.address
        return None


def read_functions(file: BinaryIO) -> ElfFunctions | None:
    """The functions of the ELF file open as *file*; None for a file that is not a 64-bit little-endian ELF."""
    try:
        elf = ELFFile(file)
        if elf.elfclass != 64 or not elf.little_endian:
            return None
        segments = [
            _Segment(segment["p_offset"], segment["p_filesz"], segment["p_vaddr"])
            for segment in elf.iter_segments()
            if segment["p_type"] == "PT_LOAD"
        ]
        return ElfFunctions(_build_id(elf), segments, _functions(elf))
    except (ELFError, OSError, ValueError, struct.error):
        return None


def read_build_id(file: BinaryIO) -> str | None:
    """The GNU build id of the 64-bit little-endian ELF file open as *file*, from its PT_NOTE segments, by reading
    only its headers and notes; None where it has none there (or is not such a file)."""
    try:
        file.seek(0)
        header = file.read(_ELF_HEADER.size)
        if len(header) < _ELF_HEADER.size or header[:6] != b"\x7fELF\x02\x01":
            return None
        fields = _ELF_HEADER.unpack(header)
        table_at, entry_size, entries = fields[5], fields[9], fields[10]
        if entry_size != _PROGRAM_HEADER.size or entries > 256:
            return None
        file.seek(table_at)
        table = file.read(entry_size * entries)
        for kind, _flags, offset, _vaddr, _paddr, size, _memsz, _align in _PROGRAM_HEADER.iter_unpack(
            table[: len(table) - len(table) % entry_size]
        ):
            if kind != _PT_NOTE or size > _NOTES_LIMIT:
                continue
            file.seek(offset)
            found = _build_id_note(file.read(size))
            if found is not None:
                return found
    except (OSError, ValueError, struct.error):
        return None
    return None


def _build_id_note(notes: bytes) -> str | None:
    """The GNU build id among *notes* (each header, name and description padded to 4 bytes)."""
    at = 0
    while at + _NOTE_HEADER.size <= len(notes):
        name_size, description_size, kind = _NOTE_HEADER.unpack_from(notes, at)
        name_at = at + _NOTE_HEADER.size
        description_at = name_at + (name_size + 3) // 4 * 4
        at = description_at + (description_size + 3) // 4 * 4
        whole = description_at + description_size <= len(notes)
        if kind == _NT_GNU_BUILD_ID and notes[name_at : name_at + name_size] == b"GNU\0" and whole:
            return notes[description_at : description_at + description_size].hex()
    return None


def _build_id(elf: Any) -> str | None:
    """The GNU build id, from its section or, where a tool renamed sections, from a PT_NOTE segment."""
    section = elf.get_section_by_name(".note.gnu.build-id")
    holders = [section] if section is not None else [s for s in elf.iter_segments() if s["p_type"] == "PT_NOTE"]
    for holder in holders:
        for note in holder.iter_notes():
            if note["n_type"] == "NT_GNU_BUILD_ID":
                return str(note["n_desc"])
    return None


def _functions(elf: Any) -> list[tuple[int, int, str]]:
    """(start, end, name) of each function symbol; aliases at one address named once (the name with the fewest
    leading underscores: ``sched_yield`` rather than ``__sched_yield``); a symbol without a size ends where the next
    begins."""
    for table_name in (".symtab", ".dynsym"):
        table = elf.get_section_by_name(table_name)
        if table is None or table["sh_entsize"] != _SYMBOL.size:
            continue
        strings = elf.get_section(table["sh_link"])
        if table["sh_size"] + strings["sh_size"] > SYMBOL_TABLE_LIMIT:
            continue
        raw, names = table.data(), strings.data()
        by_start: dict[int, tuple[int, str]] = {}
        for name_at, info, _other, section, value, size in _SYMBOL.iter_unpack(raw[: len(raw) - len(raw) % 24]):
            if info & 0xF not in _FUNCTION_TYPES or section == _UNDEFINED or value == 0:
                continue
            end = names.find(b"\0", name_at)
            name = names[name_at:end].decode("utf-8", "replace")
            if not name:
                continue
            known = by_start.get(value)
            if known is None or _preferred(name, size, known):
                by_start[value] = (size, name)
        if by_start:
            starts = sorted(by_start)
            found = []
            for index, start in enumerate(starts):
                size, name = by_start[start]
                following = starts[index + 1] if index + 1 < len(starts) else start
                found.append((start, start + size if size else max(following, start + 1), name))
            return found
    return []


def _preferred(name: str, size: int, known: tuple[int, str]) -> bool:
    known_size, known_name = known
    if bool(size) != bool(known_size):
        return bool(size)
    return len(name) - len(name.lstrip("_")) < len(known_name) - len(known_name.lstrip("_"))


class SymbolCache:
    """Functions of files, read once per build id (or per device, inode, size and mtime for a file without one),
    at most *capacity* files kept by identity (least recently used dropped); a build id is known while anyone holds
    its functions. Thread-safe: a file is read without the cache's lock (two threads may read one file at once)."""

    def __init__(self, capacity: int = 64, reader: Callable[[BinaryIO], ElfFunctions | None] = read_functions) -> None:
        self.capacity = capacity
        self._reader = reader
        self._by_file: OrderedDict[tuple[int, int, int, int], ElfFunctions | None] = OrderedDict()
        self._by_build_id: weakref.WeakValueDictionary[str, ElfFunctions] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        self.files_read = 0

    def functions(self, *paths: Path) -> ElfFunctions | None:
        """The functions of the regular file at the first of *paths* that opens (a FIFO or a device is never read);
        None where none can be read or it has no symbols."""
        descriptor = None
        for path in paths:
            try:
                descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                break
            except OSError:
                continue
        if descriptor is None:
            return None
        with open(descriptor, "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                return None
            key = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
            with self._lock:
                if key in self._by_file:
                    self._by_file.move_to_end(key)
                    return self._by_file[key]
            build_id = read_build_id(file)
            functions = None if build_id is None else self._by_build_id.get(build_id)
            if functions is None:
                file.seek(0)
                functions = self._reader(file)
                self.files_read += 1
        with self._lock:
            if functions is not None and functions.build_id is not None:
                functions = self._by_build_id.setdefault(functions.build_id, functions)
            self._by_file[key] = functions
            while len(self._by_file) > self.capacity:
                self._by_file.popitem(last=False)
        return functions
