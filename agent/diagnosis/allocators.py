"""The memory allocators schedwatch knows: one row each, with the environment variables that tune how freed memory is
kept or handed back to the kernel, and how its code and its locks look in a stack (the stack classifier reads them:
a thread waiting in an allocator's lock is allocator contention, not the program's lock). The process reader's
allow-list takes these names (with the pool table's), so a fix can say what a variable is set to now; nothing else
of a process's environment is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NEVER = re.compile(r"(?!)")


@dataclass(frozen=True)
class Allocator:
    """One allocator, the variables that tune it, and its code as stacks show it."""

    name: str
    variables: tuple[str, ...]
    prefixes: tuple[str, ...] = ()  # lowercased file names start with one of these (() = inside the C library)
    functions: re.Pattern[str] = NEVER  # its functions, where its file does not tell (glibc's malloc is in libc)
    lock: re.Pattern[str] = NEVER  # the slow path of its own locks: a thread there waits for another's allocation


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
    # malloc/malloc.c: the arena's mutex is taken with __libc_lock_lock (__lll_lock_wait_private when contended)
    functions=re.compile(
        r"^(?:__GI_|__libc_)?(?:malloc|free|calloc|realloc|cfree|memalign|posix_memalign)$|^_int_(?:malloc|free|"
        r"realloc|memalign)|^arena_get|^_?arena_get2|^reused_arena$|^get_free_list$|^tcache_init|^malloc_consolidate$"
    ),
    lock=re.compile(r"^__lll_lock_wait_private$|^__lll_lock_wait$|^__GI___lll_lock_wait"),
)
JEMALLOC = Allocator(
    "jemalloc",
    ("MALLOC_CONF", "JE_MALLOC_CONF"),
    prefixes=("libjemalloc",),
    functions=re.compile(r"^(?:je_|_rjem_)?(?:malloc_mutex|arena_|tcache_|extent_|large_|je_malloc$|je_free$)"),
    lock=re.compile(r"malloc_mutex_lock_slow|malloc_mutex_lock$"),
)
TCMALLOC = Allocator(
    "tcmalloc",
    ("TCMALLOC_RELEASE_RATE", "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES"),
    prefixes=("libtcmalloc",),
    functions=re.compile(r"^tcmalloc::|^tc_|^(?:base::internal::)?SpinLock"),
    # gperftools: SpinLock::SlowLock -> base::internal::SpinLockDelay (a futex wait after spinning)
    lock=re.compile(r"SpinLockDelay|SpinLock::SlowLock|SpinLockWait"),
)
MIMALLOC = Allocator(
    "mimalloc",
    ("MIMALLOC_PURGE_DELAY", "MIMALLOC_ARENA_EAGER_COMMIT"),
    prefixes=("libmimalloc",),
    functions=re.compile(r"^_?mi_"),
    lock=re.compile(r"^mi_lock|_mi_.*lock"),
)
ALLOCATORS: tuple[Allocator, ...] = (GLIBC, JEMALLOC, TCMALLOC, MIMALLOC)


def allocator_of(library: str, function: str | None) -> Allocator | None:
    """The allocator whose code a frame (its file name, its function) is, or None."""
    name = library.lower()
    for allocator in ALLOCATORS:
        if any(name.startswith(prefix) for prefix in allocator.prefixes):
            return allocator
    if function is None:
        return None
    in_libc = re.match(r"^(?:libc[.-]|libc$)|^\(program\)$", name) is not None  # or linked into the program
    for allocator in ALLOCATORS:
        if (allocator is not GLIBC or in_libc) and allocator.functions.search(function):
            return allocator
    return None


# Every variable of every row: added to the process reader's allow-list.
ALLOCATOR_VARIABLES: tuple[str, ...] = tuple(name for allocator in ALLOCATORS for name in allocator.variables)
