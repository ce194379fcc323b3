"""A process's executable mappings from /proc/PID/maps: which file (and where in it) an address of the process is."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from agent.machine.procfs import ProcFS

VDSO = "[vdso]"  # the kernel's code mapped into every process (clock_gettime, gettimeofday, getcpu)


@dataclass(frozen=True)
class Mapping:
    """One executable mapping of a file."""

    start: int
    end: int
    offset: int  # of the file, at start
    device: tuple[int, int]  # major, minor
    inode: int
    path: str  # as the process sees it (surrogate-escaped where not UTF-8)

    def file_offset(self, address: int) -> int:
        """Where in the file *address* is."""
        return address - self.start + self.offset


class ExecutableMappings:
    """The executable file mappings of one process at one moment, searchable by address."""

    def __init__(self, mappings: list[Mapping]) -> None:
        self._mappings = sorted(mappings, key=lambda mapping: mapping.start)
        self._starts = [mapping.start for mapping in self._mappings]

    def __len__(self) -> int:
        return len(self._mappings)

    def all(self) -> list[Mapping]:
        """Every mapping, lowest address first."""
        return list(self._mappings)

    def find(self, address: int) -> Mapping | None:
        """The mapping holding *address*, or None (anonymous memory, JIT code, the vDSO, or unmapped)."""
        index = bisect.bisect_right(self._starts, address) - 1
        if index < 0:
            return None
        mapping = self._mappings[index]
        return mapping if address < mapping.end else None


def parse_maps(text: str) -> ExecutableMappings:
    """The executable mappings of files in the text of /proc/PID/maps (``start-end perms offset major:minor inode
    path``), and the vDSO's (``[vdso]``); anonymous and other pseudo mappings are left out."""
    found = []
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "x" not in fields[1]:
            continue
        if fields[5] != VDSO and (fields[4] == "0" or not fields[5].startswith("/")):
            continue
        try:
            start, end = (int(part, 16) for part in fields[0].split("-", 1))
            major, minor = (int(part, 16) for part in fields[3].split(":", 1))
            found.append(Mapping(start, end, int(fields[2], 16), (major, minor), int(fields[4]), fields[5]))
        except ValueError:
            continue
    return ExecutableMappings(found)


def read_maps(procfs: ProcFS, pid: int) -> ExecutableMappings | None:
    """The executable mappings of process *pid* now; None when it is gone or its maps cannot be read."""
    text = procfs.read_text(pid, "maps")
    return None if text is None else parse_maps(text)
