"""`schedwatch profile`'s output: folded lines flame-graph tools read, and JSON valid against its schema."""

from __future__ import annotations

from agent.commands.profile import ProfileRow, folded, to_json
from agent.diagnosis.facts import Workload
from tests.support.schemas import assert_valid

POOL = Workload(cgroup="/pool")
ROWS = [
    ProfileRow(POOL, 41, "python3", "libscipy_openblas64_.so", "0.3.31.188.0", "blas_thread_server", "user", 700),
    ProfileRow(POOL, 41, "python3", "[kernel]", "", "do_sched_yield", "kernel", 30),
    ProfileRow(POOL, 42, "py;thon", "python3.11", "", "_PyEval_EvalFrameDefault", "user", 12),
]


def test_folded_lines_are_frames_then_one_count() -> None:
    lines = folded(ROWS)
    assert lines == sorted(lines)
    assert "/pool;python3 (41);libscipy_openblas64_.so;blas_thread_server 700" in lines
    for line in lines:
        stack, count = line.rsplit(" ", 1)
        assert int(count) > 0
        assert len(stack.split(";")) == 4  # a ';' in a name cannot add a frame
    assert any("py:thon (42)" in line for line in lines)


def test_json_is_valid_and_sums_per_workload() -> None:
    document = to_json(ROWS, 10, 49)
    assert_valid(document)
    assert document["samples"] == 742
    assert document["workloads"][0]["samples"] == 742
    assert document["workloads"][0]["rows"][1]["version"] is None
