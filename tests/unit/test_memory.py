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


def imported_after(statement: str) -> set[str]:
    """Top-level packages a fresh interpreter holds after running `statement`."""
    program = f"import sys\n{statement}\nprint(' '.join(sorted({{name.split('.')[0] for name in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_the_agent_imports_neither_rich_nor_attrs_until_a_report_is_printed():
    """structlog would load rich and attrs for pretty tracebacks: memory the running agent never uses."""
    loaded = imported_after("import agent.cli, agent.exporter, agent.web")
    assert {"agent", "structlog", "prometheus_client"} <= loaded  # the imports did run
    assert not loaded & {"rich", "attr", "bcc"}
    assert "rich" in imported_after("import agent.cli\nfrom agent.diagnosis.render import text")


def test_console_logs_still_show_a_traceback_without_rich():
    program = """
import io, sys
from agent import log
sys.stderr = io.StringIO()
log.configure("info", "console")
try:
    1 / 0
except ZeroDivisionError:
    log.get_logger("test").exception("it broke")
text = sys.stderr.getvalue()
sys.__stdout__.write(text)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert "it broke" in done.stdout
    assert "ZeroDivisionError: division by zero" in done.stdout
    assert "Traceback" in done.stdout
