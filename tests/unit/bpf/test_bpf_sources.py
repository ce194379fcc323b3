"""Guard: every tracepoint program in bpf/ (the shared header's included) and the benchmark's empty floor lets the event
through.

A perf-attached tracepoint program that returns 0 drops the event for every perf user of that tracepoint
(tests/kernel/test_coexistence.py is the proof on a real kernel); this scan keeps a 0 from coming back.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.agent import REPO

HEADER = REPO / "bpf" / "schedwatch.h"
# The header holds the process lifecycle's programs, which every program includes.
SOURCES = [HEADER, *sorted((REPO / "bpf").glob("*.c")), *sorted((REPO / "bench").glob("empty*.bpf.c"))]
# Programs on a perf event of their own (on-CPU sampling) sit on no tracepoint another tracer reads.
SAMPLING = sorted(path for path in SOURCES if "struct bpf_perf_event_data" in path.read_text())
TRACING = [path for path in SOURCES if path not in SAMPLING]
CONSTANT = "KEEP_EVENT"
PROGRAM = re.compile(r"\b(?:RAW_)?TRACEPOINT_PROBE\s*\(([^)]*)\)\s*\{")
RETURN = re.compile(r"\breturn\b([^;]*);")


def program_bodies(source: str) -> dict[str, str]:
    """Each tracepoint program's name and body (between its braces, comments removed)."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.DOTALL)
    bodies: dict[str, str] = {}
    for match in PROGRAM.finditer(code):
        depth, end = 1, match.end()
        while depth:
            if end >= len(code):
                raise ValueError(f"unbalanced braces in program {match.group(1)}")
            depth += {"{": 1, "}": -1}.get(code[end], 0)
            end += 1
        name = re.sub(r"\s+", "", match.group(1))
        bodies[name] = code[match.end() : end - 1]
    return bodies


def wrong_exits(source: str) -> list[str]:
    """Every exit of a program that does not return KEEP_EVENT, or that falls off the end without a return."""
    problems = []
    for name, body in program_bodies(source).items():
        returned = [value.strip() for value in RETURN.findall(body)]
        problems += [f"{name}: return {value}" for value in returned if value != CONSTANT]
        if not re.search(rf"\breturn\s+{CONSTANT}\s*;\s*$", body):
            problems.append(f"{name}: does not end with return {CONSTANT}")
    return problems


def test_the_constant_lets_events_through() -> None:
    defined = re.search(rf"^#define\s+{CONSTANT}\s+(\S+)", HEADER.read_text(), re.MULTILINE)
    assert defined is not None, f"{HEADER} does not define {CONSTANT}"
    assert int(defined.group(1), 0) != 0


def test_only_the_sampling_program_runs_on_a_perf_event_of_its_own() -> None:
    assert [path.name for path in SAMPLING] == ["oncpu.bpf.c"]
    assert program_bodies(SAMPLING[0].read_text()) == {}


@pytest.mark.parametrize("path", TRACING, ids=lambda path: str(path.relative_to(REPO)))
def test_every_program_returns_the_constant_on_every_path(path: Path) -> None:
    source = path.read_text()
    assert program_bodies(source), f"{path} defines no tracepoint program"
    assert wrong_exits(source) == [], f"{path}: a tracepoint program must return {CONSTANT} on every path"


def test_the_scan_finds_a_program_that_drops_events() -> None:
    source = """
    static __always_inline int bucket(u64 ns) { if (ns < 10) return 0; return 1; }
    TRACEPOINT_PROBE(sched, sched_switch)
    {
        if (args->prev_pid == 0) { return 0; }  /* idle */
        return KEEP_EVENT;
    }
    TRACEPOINT_PROBE(sched, sched_wakeup) { if (args->pid) return KEEP_EVENT; wakeups.increment(0); }
    TRACEPOINT_PROBE(syscalls, sys_enter_futex) { return KEEP_EVENT; }
    """
    assert sorted(program_bodies(source)) == ["sched,sched_switch", "sched,sched_wakeup", "syscalls,sys_enter_futex"]
    assert wrong_exits(source) == [
        "sched,sched_switch: return 0",
        f"sched,sched_wakeup: does not end with return {CONSTANT}",
    ]
