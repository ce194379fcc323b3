"""The agent's malloc tuning: threads share one arena, so memory freed after a scrape can go back to the kernel."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import ctypes, sys, threading
from agent import memory
if sys.argv[1] == "limit":
    assert memory.limit_arenas(), "glibc refused M_ARENA_MAX"
def churn():
    for _ in range(5):
        blocks = [bytearray(4096) for _ in range(2000)]
        del blocks
threads = [threading.Thread(target=churn) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
memory.release_free_memory()
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def arenas(mode: str) -> int:
    """Arenas glibc reports (malloc_stats prints one 'Arena N:' block each) after four threads allocated."""
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True)
    return sum(1 for line in done.stderr.splitlines() if line.startswith("Arena "))


def test_threads_allocate_from_one_arena_when_limited():
    assert arenas("default") > 1  # each allocating thread gets an arena of its own by default
    assert arenas("limit") == 1
