"""Saved artifacts -> the facts the rules read (agent/diagnosis/inputs/artifacts): each tool alone, several merged
into one environment, a saved diagnose report read back, and the one-line errors.

Expected values are read off the fixture files (tests/unit/fixtures/artifacts/, sources in its README); sums over
a file were checked with awk, e.g. ``awk '$1=="sched_yield"{c+=$2} END{print c}' gcp_perf_trace_s.txt``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from agent.diagnosis.facts import CpuShares, Facts, ThreadView, WorkloadView
from agent.diagnosis.findings import SCHEMA, Diagnosis
from agent.diagnosis.inputs.artifacts import OfflineError, read_environment
from agent.diagnosis.inputs.artifacts.errors import RUN_AGAIN
from agent.diagnosis.inputs.artifacts.known import mean_known, seconds_by_call, sum_known
from agent.diagnosis.inputs.artifacts.merge import first_known
from agent.diagnosis.inputs.artifacts.saved_report import SAVE_AGAIN
from agent.diagnosis.render.json_report import to_json
from tests.unit.diagnosis.report_samples import sample_diagnosis
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"


def facts_of(*names: str) -> Facts:
    return read_environment([FIXTURES / name for name in names])


def only_workload(facts: Facts) -> WorkloadView:
    assert len(facts.workloads) == 1
    return facts.workloads[0]


def thread(workload: WorkloadView, tid: int) -> ThreadView:
    found = [view for view in workload.thread_views or () if view.tid == tid]
    assert len(found) == 1, f"thread {tid} not in the facts"
    return found[0]


# --- one tool at a time ----------------------------------------------------------------------------------------


def test_seed_gcp_perf_trace_gives_each_thread_its_yields_and_futex_waits() -> None:
    workload = only_workload(facts_of("gcp_perf_trace_s.txt"))
    assert workload.threads == 20 and workload.seconds is None
    worker = thread(workload, 2847)
    assert (worker.comm, worker.sched_yield_calls, worker.futex_calls) == ("python", 5119771, 2909)
    assert worker.sched_yield_seconds == pytest.approx(63.387192)
    assert worker.futex_seconds == pytest.approx(269.175495)
    assert worker.futex_max_seconds == pytest.approx(21.907964)
    assert worker.syscall_seconds == pytest.approx(269.175495 + 63.387192)
    assert thread(workload, 2848).comm == "ython"  # as perf printed it
    parked = thread(workload, 2862)
    assert (parked.sched_yield_calls, parked.futex_calls) == (0, 1)  # perf sees every call: no row is 0 calls
    assert workload.sched_yield_calls == 84_921_956
    assert workload.futex_wait_seconds == pytest.approx(4076.675299)
    assert workload.syscall_seconds is not None
    assert workload.syscall_seconds["sched_yield"] == pytest.approx(976.269023)
    assert workload.futex_calls is None  # perf does not split futex calls by operation: unknown, not 0
    assert workload.processes is None and workload.cpu_used_cores is None


def test_perf_trace_notes_say_it_has_no_clock_and_undercounts() -> None:
    notes = " ".join(facts_of("gcp_perf_trace_s.txt").notes)
    assert "does not say how long it ran" in notes
    assert "10-30x fewer" in notes
    lost = " ".join(facts_of("sick_perf_trace_s_m1_lost.txt").notes)
    assert "perf trace lost 398,604 events" in lost


def test_perf_trace_block_with_an_empty_table_has_unknown_counts() -> None:
    workload = only_workload(facts_of("sleeper_perf_trace_s_faults_sched.txt"))
    assert workload.thread_views
    assert all(view.sched_yield_calls is None and view.futex_calls is None for view in workload.thread_views)
    assert workload.sched_yield_calls is None


def test_strace_gives_the_workload_total_and_no_threads() -> None:
    facts = facts_of("sick_strace_fc.txt")
    workload = only_workload(facts)
    assert workload.sched_yield_calls == 112_764
    assert workload.thread_views is None and workload.seconds is None
    assert workload.futex_wait_seconds is None  # CPU or wall time, the table does not say
    assert workload.syscall_seconds is not None
    assert workload.syscall_seconds["wait4"] == pytest.approx(3.260132)
    assert any("cannot say which threads" in note for note in facts.notes)


def test_seed_gcp_top_gives_node_cpu_load_and_processes() -> None:
    facts = facts_of("gcp_top.txt")
    assert facts.node.cpu == CpuShares(52.0, 0.0, 43.1, 4.9, 0.0, 0.0, 0.0, 0.0)
    assert facts.node.load_average == (35.10, 12.57, 4.53)
    assert facts.node.run_queue == 15
    assert facts.node.cpus is None  # no per-CPU lines: unknown
    workload = only_workload(facts)
    assert workload.processes is not None and len(workload.processes) == 16
    busiest = max(workload.processes, key=lambda process: process.cpu_percent or 0.0)
    assert (busiest.pid, busiest.command, busiest.cpu_percent) == (2501, "python", 380.5)


def test_top_batch_uses_the_last_refresh() -> None:
    facts = facts_of("sick_top_b.txt")
    assert facts.node.cpu is not None and (facts.node.cpu.user, facts.node.cpu.system) == (75.2, 24.8)
    processes = {process.pid: process for process in only_workload(facts).processes or ()}
    assert processes[27751].cpu_percent == 9.8


def test_top_threads_view_gives_thread_views() -> None:
    workload = only_workload(facts_of("sick_top_Hb.txt"))
    assert workload.processes is None
    assert thread(workload, 27752).cpu_percent == 11.1


def test_pidstat_gives_cpu_system_share_and_time_waiting_for_a_cpu() -> None:
    facts = facts_of("sick_pidstat_t.txt")
    workload = only_workload(facts)
    assert facts.node.cpus == 2
    assert workload.seconds == 3.0  # intervals ending 01:15:01, :02, :03
    # Average rows of the five processes: %CPU 4.32 + 9.97 + 9.30 + 9.63 + 9.30
    assert workload.cpu_used_cores == pytest.approx(0.4252)
    # %system 0.66 + 1.66 + 2.33 + 2.99 + 2.66 over %usr + %system (32.22 + 10.30)
    assert workload.system_share == pytest.approx(10.30 / 42.52)
    # %wait 1.33 + 80.40 + 83.06 + 83.06 + 82.39 of one CPU each, over 3 s
    assert workload.runqueue_wait_seconds == pytest.approx(3.3024 * 3.0)
    assert workload.threads == 12
    processes = {process.pid: process for process in workload.processes or ()}
    assert (processes[27676].threads, processes[27751].threads) == (4, 2)
    pool_thread = thread(workload, 27758)
    assert (pool_thread.pid, pool_thread.cpu_percent, pool_thread.system_percent) == (27751, 2.99, 1.00)


def test_mpstat_gives_cpus_and_the_average_shares() -> None:
    facts = facts_of("sick_mpstat.txt")
    assert facts.node.cpus == 2
    assert facts.node.cpu == CpuShares(87.42, 0.0, 12.42, 0.0, 0.0, 0.0, 0.0, 0.17)
    assert facts.workloads == ()


def test_vmstat_skips_the_since_boot_line() -> None:
    facts = facts_of("sick_vmstat.txt")
    assert facts.node.run_queue == (12 + 12 + 16 + 12) / 4
    assert facts.node.context_switches_per_second == (183110 + 44133 + 52449 + 67111) / 4
    assert facts.node.cpu is not None
    assert (facts.node.cpu.user, facts.node.cpu.system, facts.node.cpu.softirq) == (78.25, 21.75, None)


# --- one environment from several files ------------------------------------------------------------------------


def test_seed_gcp_files_merge_into_one_environment() -> None:
    facts = facts_of("gcp_perf_trace_s.txt", "gcp_top.txt")
    assert facts.sources == ("perf trace -s gcp_perf_trace_s.txt", "top gcp_top.txt")
    workload = only_workload(facts)
    assert len(workload.thread_views or ()) == 20 and len(workload.processes or ()) == 16
    assert workload.sched_yield_calls == 84_921_956
    assert facts.node.cpu is not None and facts.node.cpu.system == 43.1
    assert len(facts.notes) == len(set(facts.notes))


def test_node_facts_prefer_machine_wide_averages_to_one_screen() -> None:
    facts = facts_of("sick_top_b.txt", "sick_mpstat.txt", "sick_vmstat.txt")
    assert facts.node.cpu is not None and facts.node.cpu.user == 87.42  # mpstat's Average, not top's screen
    assert facts.node.run_queue == 13.0  # vmstat's r, not top's running tasks
    assert facts.node.load_average == (7.86, 4.29, 1.85)  # only top tells it
    assert any("node CPU shares from mpstat" in note for note in facts.notes)


def test_threads_of_two_tools_merge_by_thread_id() -> None:
    workload = only_workload(facts_of("sick_top_Hb.txt", "sick_pidstat_t.txt"))
    assert len(workload.thread_views or ()) == 12
    merged = thread(workload, 27755)
    assert (merged.pid, merged.cpu_percent) == (27676, 3.32)  # the process from pidstat; pidstat's CPU first


def test_a_timed_tool_keeps_its_window_and_a_tracers_counts_stay_per_thread() -> None:
    facts = facts_of("sick_perf_trace_s.txt", "sick_pidstat_t.txt")
    workload = only_workload(facts)
    assert workload.seconds == 3.0 and workload.runqueue_wait_seconds == pytest.approx(3.3024 * 3.0)
    assert workload.cpu_used_cores == pytest.approx(0.4252)
    # perf's totals cover an unknown window: not divided by pidstat's, but each thread keeps its own
    assert workload.sched_yield_calls is None and workload.futex_wait_seconds is None
    assert thread(workload, 11035).sched_yield_calls == 86966
    assert any("the window is pidstat's" in note for note in facts.notes)


def test_first_known_takes_each_field_from_the_first_source_that_knows_it() -> None:
    merged = first_known([ThreadView(tid=7, comm=None, sched_yield_calls=5), ThreadView(tid=7, comm="a", pid=3)])
    assert (merged.comm, merged.pid, merged.sched_yield_calls) == ("a", 3, 5)


def test_a_directory_is_its_files(tmp_path: Path) -> None:
    for name in ("gcp_perf_trace_s.txt", "gcp_top.txt"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / ".hidden").write_text("not an artifact")
    assert read_environment([tmp_path]) == facts_of("gcp_perf_trace_s.txt", "gcp_top.txt")


# --- a saved diagnose --json report ----------------------------------------------------------------------------


def test_a_saved_report_reads_back_as_the_same_facts(tmp_path: Path) -> None:
    for names in (("gcp_perf_trace_s.txt", "gcp_top.txt"), ("sick_pidstat_t.txt", "sick_mpstat.txt")):
        facts = facts_of(*names)
        report = tmp_path / "report.json"
        report.write_text(json.dumps(to_json(Diagnosis(facts, (), (), ()))))
        assert read_environment([report]) == facts


def test_a_report_of_another_schema_is_refused(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "schedwatch.diagnosis/v0", "node": {}, "workloads": []}))
    with pytest.raises(OfflineError, match=re.escape("schedwatch.diagnosis/v0 report; " + SAVE_AGAIN)):
        read_environment([report])


def test_a_broken_report_says_to_save_it_again(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    for broken, why in (
        ({"schema": SCHEMA, "node": {}}, "the report has no 'node' object or no 'workloads' list"),
        ({"schema": SCHEMA, "node": {"cpus": "two"}, "workloads": []}, "its facts do not read back (a int expected"),
    ):
        report.write_text(json.dumps(broken))
        with pytest.raises(OfflineError) as raised:
            read_environment([report])
        message = str(raised.value)
        assert message.startswith(f"{report}: {why}") and message.endswith(SAVE_AGAIN) and "\n" not in message


def test_a_report_with_other_files_is_refused(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps(to_json(Diagnosis(facts_of("gcp_top.txt"), (), (), ()))))
    with pytest.raises(OfflineError, match="one environment by itself"):
        read_environment([report, FIXTURES / "gcp_top.txt"])


# --- errors: one line saying what to do ------------------------------------------------------------------------


def test_a_file_in_no_known_format_names_the_formats(tmp_path: Path) -> None:
    unknown = tmp_path / "notes.txt"
    unknown.write_text("the pipeline is slow on GCP\n")
    with pytest.raises(OfflineError) as raised:
        read_environment([unknown])
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{unknown}: ")
    for known in ("perf trace -s", "strace -c", "top -b", "pidstat -t", "mpstat -P ALL", "vmstat", "diagnose --json"):
        assert known in message


def test_a_tools_error_message_is_named(tmp_path: Path) -> None:
    expected = (
        "error_strace_attach.txt: strace -c printed an error instead of a report (line 1): "
        f"strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted; {RUN_AGAIN}"
    )
    with pytest.raises(OfflineError, match=re.escape(expected) + "$"):
        facts_of("error_strace_attach.txt")


def test_a_report_cut_short_is_read_as_far_as_it_goes_and_says_so(tmp_path: Path) -> None:
    cut = tmp_path / "perf.txt"
    lines = (FIXTURES / "gcp_perf_trace_s.txt").read_text(encoding="utf-8").splitlines()
    cut.write_text("\n".join(lines[:6]) + "\nfutex 58139 2371\n", encoding="utf-8")  # the paste stops mid-row
    facts = read_environment([cut])
    (thread,) = facts.workloads[0].thread_views or ()
    assert thread.tid == 2551 and thread.sched_yield_calls == 3232286 and not thread.futex_calls
    (note,) = [note for note in facts.notes if "damaged lines" in note]
    assert note == "perf.txt: damaged lines: line 7: the last row cut short (3 of 7 fields): the rows above it read"


def test_missing_file_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(OfflineError, match="cannot read it"):
        read_environment([tmp_path / "absent.txt"])
    with pytest.raises(OfflineError, match="an empty directory"):
        read_environment([tmp_path])


def test_two_traces_of_one_kind_add_up() -> None:
    facts = facts_of("gcp_perf_trace_s.txt", "baremetal_perf_trace_s.txt")
    workload = only_workload(facts)
    assert workload.sched_yield_calls == 84_921_956 + 1_639_164
    assert workload.threads == 20 + 39 and len(workload.thread_views or ()) == 59
    assert any("2 perf trace -s files: their counts are added" in note for note in facts.notes)


def test_a_comparison_report_is_not_one_environment(tmp_path: Path) -> None:
    report = tmp_path / "compare.json"
    report.write_text(json.dumps({"schema": "schedwatch.comparison/v1", "a": {}, "b": {}}))
    with pytest.raises(OfflineError, match=re.escape("a schedwatch.comparison/v1 report; " + SAVE_AGAIN)):
        read_environment([report])


def test_a_live_diagnosis_reads_back_with_every_kind_of_fact(tmp_path: Path) -> None:
    """Pools, libraries, futex calls by operation, thread variables: every field type of the views."""
    facts = sample_diagnosis().facts
    process = dataclasses.replace(
        (facts.workloads[1].processes or ())[1],
        affinity=(0, 1),
        environment=(("OPENBLAS_NUM_THREADS", "1"), ("OMP_NUM_THREADS", "unset")),
    )
    workload = dataclasses.replace(facts.workloads[1], processes=(process,))
    facts = dataclasses.replace(facts, workloads=(facts.workloads[0], workload))
    report = tmp_path / "live.json"
    report.write_text(json.dumps(to_json(Diagnosis(facts, (), (), ()))))
    assert read_environment([report]) == facts


def test_values_not_printed_are_unknown_not_zero() -> None:
    assert (sum_known([None, None]), mean_known([None]), seconds_by_call([])) == (None, None, None)
    assert (sum_known([2, None, 0.5]), mean_known([1.0, None, 4.0])) == (2.5, 2.5)
    assert seconds_by_call([("futex", 1.5), ("sched_yield", 0.25), ("futex", 2.0)]) == {
        "futex": 3.5,
        "sched_yield": 0.25,
    }


# --- inputs a person points it at (issue 34); their time and memory are measured in bench/offline_inputs.py --------


def test_directories_are_read_recursively(tmp_path: Path) -> None:
    (tmp_path / "gcp" / "tools").mkdir(parents=True)
    shutil.copy(FIXTURES / "gcp_perf_trace_s.txt", tmp_path / "gcp" / "tools")
    shutil.copy(FIXTURES / "gcp_top.txt", tmp_path / "gcp")
    facts = read_environment([tmp_path])
    assert sorted(facts.sources) == ["perf trace -s gcp_perf_trace_s.txt", "top gcp_top.txt"]


def test_files_that_are_not_tool_output_are_one_short_line(tmp_path: Path) -> None:
    for index in range(40):
        (tmp_path / f"notes-{index}.txt").write_text(f"the VM felt slow, day {index}\n")
    for index in range(3):
        (tmp_path / f"core-{index}.bin").write_bytes(b"\x7fELF\x00" + bytes(range(256)))
    (tmp_path / "empty.txt").write_bytes(b"")
    shutil.copy(FIXTURES / "gcp_perf_trace_s.txt", tmp_path)
    facts = read_environment([tmp_path])
    said = [note for note in facts.notes if note.startswith("not read: ")]
    assert said == ["not read: 44 files are not tool output: 40 text, 3 binary, 1 empty; formats read: docs/analyze.md"]
    assert facts.sources == ("perf trace -s gcp_perf_trace_s.txt",)


def test_empty_binary_and_special_files_are_refused_at_once(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(OfflineError, match=r"empty\.txt: empty; save the tool.s output into it"):
        read_environment([empty])
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + b"x" * 100_000)
    with pytest.raises(OfflineError, match=r"core\.bin: a binary file, not a tool.s text output"):
        read_environment([binary])
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    signal.alarm(5)  # opening a pipe without a writer would block: refused without opening it
    try:
        with pytest.raises(OfflineError, match="pipe: a named pipe, not a file"):
            read_environment([fifo])
    finally:
        signal.alarm(0)
    with pytest.raises(OfflineError, match="/dev/null: a character device, not a file"):
        read_environment([Path("/dev/null")])


def test_a_utf16_paste_is_not_taken_for_a_binary(tmp_path: Path) -> None:
    saved = tmp_path / "windows.txt"
    saved.write_bytes((FIXTURES / "gcp_top.txt").read_text(encoding="utf-8").encode("utf-16"))
    assert read_environment([saved]).sources == ("top windows.txt",)
