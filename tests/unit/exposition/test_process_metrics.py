"""The agent's own process_* series: the same families as prometheus_client's ProcessCollector, a cheaper count of
open descriptors."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, ProcessCollector

from agent.exposition.process import ProcessMetrics
from tests.support.agent import REPO


def families(collector: object) -> dict[str, tuple[str, str, float]]:
    return {
        family.name: (family.type, family.documentation, family.samples[0].value)
        for family in collector.collect()  # type: ignore[attr-defined]
    }


def in_fresh_interpreter(code: str) -> Any:
    """What *code* prints as JSON, run alone in a new interpreter: in the test process other threads may open and
    close descriptors between two counts."""
    shown = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_the_families_are_prometheus_clients_with_the_same_values() -> None:
    cpu_before = time.process_time()
    theirs = families(ProcessCollector(registry=CollectorRegistry()))
    ours = families(ProcessMetrics())
    cpu_between = time.process_time() - cpu_before  # what this process ran while both read /proc/self/stat
    assert {name: kind[:2] for name, kind in ours.items()} == {name: kind[:2] for name, kind in theirs.items()}
    # The same /proc/self/stat, /proc/stat and rlimit: the same numbers (virtual memory may grow in between).
    for name in ("process_start_time_seconds", "process_max_fds"):
        assert ours[name][2] == theirs[name][2], name
    assert ours["process_virtual_memory_bytes"][2] == pytest.approx(theirs["process_virtual_memory_bytes"][2], 0.01)
    # /proc/self/stat counts in clock ticks: the two reads differ by the CPU run between them, plus one tick. The
    # same ticks need not give the same float: prometheus_client divides user and system ticks apart and adds
    # (4083 ticks as 2 + 4081 are 40.830000000000005 s, ours 40.83): three roundings of half an ulp each against
    # ours of one, and the upper bound's two additions one more: 4 ulps cover both ends.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    theirs_cpu, ours_cpu = theirs["process_cpu_seconds"][2], ours["process_cpu_seconds"][2]
    rounding = 4 * math.ulp(theirs_cpu + cpu_between + tick)
    assert theirs_cpu - rounding <= ours_cpu <= theirs_cpu + cpu_between + tick + rounding
    assert ours["process_resident_memory_bytes"][2] == pytest.approx(theirs["process_resident_memory_bytes"][2], 0.05)


def test_open_descriptors_are_prometheus_clients_count_less_its_listing() -> None:
    # prometheus_client counts the descriptor its own listing holds; the kernel's count does not.
    code = (
        "import json; from prometheus_client import CollectorRegistry, ProcessCollector; "
        "from agent.exposition.process import ProcessMetrics; "
        "count = lambda c: next(f.samples[0].value for f in c.collect() if f.name == 'process_open_fds'); "
        "print(json.dumps([count(ProcessMetrics()), count(ProcessCollector(registry=CollectorRegistry()))]))"
    )
    ours, theirs = in_fresh_interpreter(code)
    assert ours == theirs - 1


def test_open_descriptors_are_counted_exactly() -> None:
    code = (
        "import json, os; from agent.exposition.process import open_descriptors; "
        "before = open_descriptors(); held = [os.open('/', os.O_RDONLY) for _ in range(500)]; "
        "during = open_descriptors(); listed = len(os.listdir('/proc/self/fd')) - 1; "
        "[os.close(fd) for fd in held]; print(json.dumps([before, during, listed, open_descriptors()]))"
    )
    before, during, listed, after = in_fresh_interpreter(code)
    assert (during, listed, after) == (before + 500, before + 500, before)


def test_before_linux_6_2_the_descriptors_are_listed() -> None:
    # Older kernels report size 0 for /proc/self/fd (this kernel cannot be made to): the listing is counted instead.
    code = (
        "import json, os; from agent.exposition import process; "
        "expected = process.open_descriptors(); real_stat = os.stat; faked = []; "
        "os.stat = lambda path, *a, **k: faked.append(path) or os.stat_result((0,) * 10) "
        "if path == process.FD_DIRECTORY else real_stat(path, *a, **k); "
        "print(json.dumps([expected, process.open_descriptors(), len(faked)]))"
    )
    expected, listed, faked = in_fresh_interpreter(code)
    assert faked == 1, "the size 0 of an older kernel was never reported: the test no longer tests the fallback"
    assert listed == expected
