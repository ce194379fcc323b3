"""The memory allocators schedwatch knows: one row each, with the environment variables that tune how freed memory is
kept or handed back to the kernel. The process reader's allow-list takes these names (with the pool table's), so a
fix can say what a variable is set to now; nothing else of a process's environment is read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Allocator:
    """One allocator and the variables that tune it."""

    name: str
    variables: tuple[str, ...]


GLIBC = Allocator(
    "glibc malloc",
    (
        "MALLOC_ARENA_MAX",
        "MALLOC_MMAP_MAX_",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_TOP_PAD_",
        "GLIBC_TUNABLES",  # glibc.malloc.* tunables, the same settings under their newer names
    ),
)
JEMALLOC = Allocator("jemalloc", ("MALLOC_CONF", "JE_MALLOC_CONF"))
TCMALLOC = Allocator("tcmalloc", ("TCMALLOC_RELEASE_RATE",))
MIMALLOC = Allocator("mimalloc", ("MIMALLOC_PURGE_DELAY", "MIMALLOC_ARENA_EAGER_COMMIT"))
ALLOCATORS: tuple[Allocator, ...] = (GLIBC, JEMALLOC, TCMALLOC, MIMALLOC)

# Every variable of every row: added to the process reader's allow-list.
ALLOCATOR_VARIABLES: tuple[str, ...] = tuple(name for allocator in ALLOCATORS for name in allocator.variables)
