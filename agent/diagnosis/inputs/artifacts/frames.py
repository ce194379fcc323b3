"""A stack frame as every stack format reads it, and the names of the C library's calls that say where a stack stands
(sched_yield, a futex wait, I/O, a sleep): shared by the stack formats and the stack classifier."""

from __future__ import annotations

import re
from dataclasses import dataclass

PROGRAM = "(program)"  # a gdb frame without `from LIB`: the program itself, or a library with debug info
LIBC_SOURCES = re.compile(r"sysdeps/|nptl/|^pthread_\w+\.c$|^lowlevellock\.S$|^futex-internal\.[ch]$|^clone\.S$|"
                          r"^syscall\.S$|^__syscall_cp\.c$|^waitpid\.c$")  # fmt: skip
LIBC_FILES = re.compile(r"^(?:libc|libpthread|ld-linux[\w-]*|libc\.musl[\w-]*|ld-musl[\w-]*)(?:[.-]|$)")
YIELD = re.compile(r"^(?:__GI_)?(?:__)?sched_yield$|^pthread_yield$")
FUTEX = re.compile(r"futex|^__lll_lock_wait|^pthread_cond_(?:timed|clock)?wait|^__pthread_cond_|^(?:__new_)?sem_"
                   r"(?:timed)?wait|^pthread_(?:clock|timed)?join|^__pthread_clockjoin|^pthread_mutex_lock|"
                   r"__platform_wait|^__lll_timedlock_wait|^do_futex_wait")  # fmt: skip
IO = re.compile(r"^(?:__GI___|__libc_|__)?(?:poll|ppoll|epoll_wait|epoll_pwait|select|pselect6?|read|recv\w*|"
                r"accept4?|waitpid|wait4|sccp|__syscall_cp)$")  # fmt: skip
SLEEP = re.compile(r"nanosleep|^usleep$|^sleep$")
KERNEL_IO = re.compile(r"^(?:ep_poll|do_sys_poll|do_select|core_sys_select|pipe_read|wait_woken|sk_wait_data|"
                       r"unix_stream_read_generic|tcp_recvmsg|io_schedule|folio_wait_bit)")  # fmt: skip
_WAITS = (("yield", YIELD), ("futex", FUTEX), ("sleep", SLEEP), ("io", IO))  # the first that matches


def wait_of(function: str) -> str | None:
    """What a call of the C library named *function* waits in: yield, futex, sleep, io; None for none of them."""
    return next((wait for wait, pattern in _WAITS if pattern.search(function)), None)


@dataclass(frozen=True)
class Frame:
    """One frame: its function (None: an address only) and the library it is in."""

    function: str | None
    library: str
    source: str | None = None  # gdb's `at FILE:LINE`

    @property
    def in_libc(self) -> bool:
        """True for the C library's own frames (the wrappers around a system call)."""
        if LIBC_FILES.match(self.library):
            return True
        return (self.source is not None and LIBC_SOURCES.search(self.source.rsplit("/", 1)[-1]) is not None) or (
            self.source is not None and LIBC_SOURCES.search(self.source) is not None
        )
