"""The live code facts: two readings of the agent's code rows -> a workload's samples and call sites over the window,
and what the report and the pool rule make of them."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from agent.diagnosis.facts import CodeShare, Workload, WorkloadView
from agent.diagnosis.inputs.live.code_inputs import with_code_inputs
from agent.diagnosis.inputs.live.window import Window
from agent.diagnosis.render.code import code_lines
from agent.diagnosis.rules.pool import pool_code
from agent.series.reading import read_families

POOL = Workload(cgroup="/pool")
LABELS = 'container_id="",container="",pod="",namespace="",cgroup="/pool"'
HEAD = """# TYPE schedwatch_build_info gauge
schedwatch_build_info{version="x"} 1
# TYPE schedwatch_source_up gauge
schedwatch_source_up{source="oncpu"} 1
schedwatch_source_up{source="syscalls"} 1
"""


BLAS = 'library="libscipy_openblas64_.so",version="0.3.31",function="blas_thread_server",mode="user"'
PYTHON = 'library="python3.11",version="",function="(unknown)",mode="user"'
REST = 'library="(other)",version="",function="(other)",mode=""'
INNER = 'library="libopenblas64_p-r0.3.23.dev.so",version="0.3.23.dev",function="inner_thread"'


def reading(at: float, blas: int, python: int, other: int, yields: int) -> object:
    samples, sites = "schedwatch_cpu_samples_total", "schedwatch_sched_yield_calls_by_site_total"
    text = HEAD + "".join(
        (
            f"# TYPE {samples} counter\n",
            f"{samples}{{{LABELS},{BLAS}}} {blas}\n",
            f"{samples}{{{LABELS},{PYTHON}}} {python}\n",
            f"{samples}{{{LABELS},{REST}}} {other}\n",
            f"# TYPE {sites} counter\n",
            f"{sites}{{{LABELS},{INNER}}} {yields}\n",
        )
    )
    return read_families(text_string_to_metric_families(text), at)


def test_rows_grow_over_the_window_and_other_counts_in_the_total() -> None:
    window = Window(reading(0, 100, 10, 5, 1000), reading(10, 820, 40, 25, 5000))  # type: ignore[arg-type]
    view = with_code_inputs(window, WorkloadView(ref=POOL))
    assert view.cpu_samples == (
        CodeShare("libscipy_openblas64_.so", "blas_thread_server", "user", 720, "0.3.31"),
        CodeShare("python3.11", None, "user", 30),
    )
    assert view.cpu_samples_total == 720 + 30 + 20
    assert view.yield_sites == (
        CodeShare("libopenblas64_p-r0.3.23.dev.so", "inner_thread", "user", 4000, "0.3.23.dev"),
    )
    assert view.futex_sites is None


def test_a_row_that_started_again_counts_its_new_series() -> None:
    window = Window(reading(0, 500, 10, 5, 0), reading(10, 30, 10, 5, 0))  # type: ignore[arg-type]
    view = with_code_inputs(window, WorkloadView(ref=POOL))
    assert view.cpu_samples == (CodeShare("libscipy_openblas64_.so", "blas_thread_server", "user", 30, "0.3.31"),)


def test_the_report_and_the_pool_rule_read_the_rows() -> None:
    window = Window(reading(0, 0, 0, 0, 0), reading(10, 720, 30, 50, 4000))  # type: ignore[arg-type]
    view = with_code_inputs(window, WorkloadView(ref=POOL))
    lines = code_lines(view)
    assert lines == (
        "on-CPU samples (800): 90 % in libscipy_openblas64_.so 0.3.31 (openblas's pool): blas_thread_server 90 %; "
        "Python (python3.11) 4 %; other code 6 %",
        "sched_yield calls (4,000) from inner_thread in libopenblas64_p-r0.3.23.dev.so (openblas's pool) 100 %",
    )
    code = pool_code(view)
    assert code is not None and code.spin is not None
    assert (code.library, code.spin.function, round(code.spin_share, 2)) == (
        "libscipy_openblas64_.so",
        "blas_thread_server",
        0.9,
    )
