"""The thread-count and allocator variables of a process's environment, and nothing else of it.

Privacy rule: /proc/PID/environ is parsed entry by entry in the buffer the kernel returned; only the values of the
allow-listed names (the variables of the pool table, agent/diagnosis/pools.py, and of the allocator table,
agent/diagnosis/allocators.py) are copied out. No other entry becomes an object of its own, and the buffer is dropped
when the parse returns, so no other variable is stored, logged, exported or printed.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.diagnosis.allocators import ALLOCATOR_VARIABLES
from agent.diagnosis.inputs.processes.access import Access, read_private
from agent.diagnosis.pools import ALLOWED_VARIABLES
from agent.machine.procfs import ProcFS, decode, printable

ALLOWED: tuple[str, ...] = (*ALLOWED_VARIABLES, *ALLOCATOR_VARIABLES)  # the pool table's, then the allocators'
VALUE_LIMIT = 64  # characters kept of an allow-listed value (a thread count or a byte count needs a few)
ENVIRON_LIMIT = 1024 * 1024  # bytes of /proc/PID/environ read at most
UNSET = "unset"

_KEYS = tuple((name, (name + "=").encode()) for name in ALLOWED)


@dataclass(frozen=True)
class ThreadEnvironment:
    """The allow-listed variables of one process: a value each, or absence."""

    access: Access
    values: tuple[tuple[str, str], ...]  # (name, value) of the allow-listed names that are set, in ALLOWED order

    def value(self, name: str) -> str:
        """The variable's value, "unset", or why it is not known ("not permitted", "gone")."""
        if name not in ALLOWED:
            raise KeyError(f"{name} is not an allow-listed variable")
        if self.access is not Access.READ:
            return str(self.access.value)
        for known, value in self.values:
            if known == name:
                return value
        return UNSET

    def as_dict(self) -> dict[str, str]:
        """Every allow-listed name with its value, "unset", or why it is not known."""
        return {name: self.value(name) for name in ALLOWED}


def parse_environ(raw: bytes) -> tuple[tuple[str, str], ...]:
    """The allow-listed (name, value) pairs of an environ buffer (NUL-separated NAME=VALUE entries).

    The first entry of a name wins, as getenv(3) finds it. Values are made printable and cut to VALUE_LIMIT.
    """
    found: dict[str, str] = {}
    start = 0
    end = len(raw)
    while start < end:
        stop = raw.find(b"\0", start)
        if stop < 0:
            stop = end
        for name, key in _KEYS:
            if name not in found and raw.startswith(key, start, stop):
                found[name] = printable(decode(raw[start + len(key) : stop]))[:VALUE_LIMIT]
                break
        start = stop + 1
    return tuple((name, found[name]) for name in ALLOWED if name in found)


def read_environment(procfs: ProcFS, pid: int | str) -> ThreadEnvironment:
    """The allow-listed thread variables of *pid*, or why they cannot be known."""
    access, raw = read_private(procfs, pid, "environ", ENVIRON_LIMIT)
    values = () if raw is None else parse_environ(raw)
    del raw
    return ThreadEnvironment(access, values)
