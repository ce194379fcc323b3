"""Kernel functions by address, from /proc/kallsyms (read once; addresses there are zero without the privilege to see
them, and then no kernel address is named)."""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence

from agent.machine.procfs import ProcFS

_TEXT_TYPES = frozenset("tTwW")


class KernelSymbols:
    """The kernel's text symbols, searchable by address. Packed: the addresses in one array, the names in one string
    with an array of where each ends (a list of 120,000 ints and strings held 14 MB of the agent; this, 4 MB)."""

    def __init__(self, starts: Sequence[int], names: Sequence[str]) -> None:
        self._starts = array("Q", starts)
        self._names = "".join(names)
        self._ends = array("L", [0])
        end = 0
        for name in names:
            end += len(name)
            self._ends.append(end)

    def __len__(self) -> int:
        return len(self._starts)

    def function_at(self, address: int) -> str | None:
        """The kernel function holding *address* (the last text symbol at or below it), or None."""
        index = bisect.bisect_right(self._starts, address) - 1
        return self._names[self._ends[index] : self._ends[index + 1]] if index >= 0 else None


def parse_kallsyms(text: str) -> KernelSymbols:
    """Text symbols of /proc/kallsyms' text (``address type name [module]``); none when every address is 0."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[1] not in _TEXT_TYPES:
            continue
        try:
            address = int(fields[0], 16)
        except ValueError:
            continue
        if address:
            found.setdefault(address, fields[2])
    starts = sorted(found)
    return KernelSymbols(starts, [found[start] for start in starts])


def read_kallsyms(procfs: ProcFS) -> KernelSymbols:
    """The kernel's symbols now (empty when /proc/kallsyms cannot be read)."""
    return parse_kallsyms(procfs.read_root_text("kallsyms", limit=64 * 1024 * 1024) or "")
