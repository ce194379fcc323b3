"""Profiles and stacks read from public pastes (sources in fixtures/artifacts/README.md): perf report / perf top
rows into on-CPU samples, gdb and backtrace_symbols stacks into call sites. Values are read off the files by eye."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.diagnosis.facts import CodeShare
from agent.diagnosis.inputs.artifacts import (
    backtrace,
    cgroup_cpu,
    folded,
    perf_report,
    pressure,
    proc_sched,
    proc_status,
    read_environment,
)
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.render.json_report import to_json
from agent.diagnosis.rules import code, diagnose
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_perf_report_of_the_interactive_screen_with_its_sample_count() -> None:
    report = perf_report.parse(read("public_perf_report_hhvm5081_futex.txt"))
    assert (report.samples, report.event, len(report.rows), report.cut_rows) == (1000, "cycles", 13, 0)
    assert [row.percent for row in report.rows[:3]] == [14.36, 14.18, 13.86]
    assert {row.comm for row in report.rows} == {"hhvm"} and {row.mode for row in report.rows} == {"kernel"}
    assert report.rows[3].symbol == "get_futex_key_refs.isra.13"  # trailing padding cut
    workload = read_environment([FIXTURES / "public_perf_report_hhvm5081_futex.txt"]).workloads[0]
    assert workload.cpu_samples is not None and workload.cpu_samples_total == 1000
    assert workload.cpu_samples[0] == CodeShare("[kernel]", "get_futex_key", "kernel", pytest.approx(143.6))


def test_perf_report_rows_with_decimal_commas_and_the_last_row_cut_short() -> None:
    report = perf_report.parse(read("public_perf_report_openblas1193_tail_comma.txt"))
    assert len(report.rows) == 10 and report.cut_rows == 1 and report.samples is None
    assert report.rows[0].dso == "libopenblas_sandybridgep-r0.2.20.dev.so" and report.rows[0].percent == 0.15
    assert report.rows[4].comm == "mainAsnaGcc" and report.rows[4].symbol == "dasnaPar_cpu._omp_fn.10"


def test_perf_report_of_perf_2_6_samples_table() -> None:
    report = perf_report.parse(read("public_perf_report_qat32_old_samples.txt"))
    top = report.rows[0]
    assert (top.samples, top.percent, top.symbol, top.dso, top.mode) == (
        120249.0, 74.6, "do_raw_spin_lock", "[kernel.kallsyms]", "kernel",
    )  # fmt: skip
    assert len(report.rows) == 11 and report.rows[1].dso == "/lib64/libpthread-2.15.so"
    total = read_environment([FIXTURES / "public_perf_report_qat32_old_samples.txt"]).workloads[0].cpu_samples_total
    assert total == pytest.approx(120249 * 100 / 74.6)


def test_perf_top_snapshots_last_screen_is_read() -> None:
    report = perf_report.parse(read("public_perf_top_liquorix56_perftop.txt"))
    assert report.snapshots == 2 and len(report.rows) == 7
    assert [row.symbol for row in report.rows[:2]] == ["_raw_spin_lock", "delay_tsc"]
    assert all(row.comm is None and row.dso == "[kernel]" for row in report.rows)


def test_perf_top_with_header_and_a_cut_row() -> None:
    report = perf_report.parse(read("public_perf_top_dynamorio4279_cut.txt"))
    assert (report.samples, report.event, len(report.rows), report.cut_rows) == (22_000_000, "cpu-clock:pppH", 3, 1)
    assert report.rows[2].dso == "libdynamorio.so" and report.rows[2].mode == "user"


def test_perf_report_children_column() -> None:
    text = (
        "# Children      Self  Command  Shared Object  Symbol\n"
        "    62.50%    12.50%  python  libc.so.6  [.] __sched_yield\n"
    )
    row = perf_report.parse(text).rows[0]
    assert (row.children, row.percent, row.comm, row.dso, row.symbol) == (
        62.5,
        12.5,
        "python",
        "libc.so.6",
        "__sched_yield",
    )


def test_backtrace_symbols_frames_with_quotes_and_elisions() -> None:
    dump = backtrace.parse(read("public_stacks_openblas4496_yield_quoted.txt"))
    assert [stack.state for stack in dump.stacks] == ["yield", "yield"] and dump.elisions == 1
    assert [len(stack.frames) for stack in dump.stacks] == [7, 5]
    caller = dump.stacks[0].caller()
    assert caller is not None and (caller.library, caller.function) == ("libopenblas_nolapack.so.0", "sgemm_thread_nt")
    workload = read_environment([FIXTURES / "public_stacks_openblas4496_yield_quoted.txt"]).workloads[0]
    assert workload.yield_sites == (CodeShare("libopenblas_nolapack.so.0", "sgemm_thread_nt", "user", 2),)


def test_gdb_thread_apply_all_bt_threads_and_states() -> None:
    dump = backtrace.parse(read("public_stacks_fio1934_condwait_cut.txt"))
    assert [stack.thread for stack in dump.stacks] == [1251746, 1251744, 1251742]
    assert [stack.state for stack in dump.stacks] == ["futex"] * 3
    assert [len(stack.frames) for stack in dump.stacks] == [7, 7, 1]  # the last thread cut after its first frame
    workload = read_environment([FIXTURES / "public_stacks_fio1934_condwait_cut.txt"]).workloads[0]
    assert workload.threads == 3
    assert workload.futex_sites == (
        CodeShare("(program)", "fio_sem_down", "user", 2),
        CodeShare("(unknown)", None, "user", 1),
    )


def test_gstack_thread_running_in_a_user_spin_lock() -> None:
    dump = backtrace.parse(read("public_stacks_gperftools663_gstack_spinlock.txt"))
    (stack,) = dump.stacks
    assert (stack.thread, stack.state, stack.frames[0].function) == (27838, "running", "base::internal::SpinLockDelay")
    assert stack.frames[8].library == "libstdc++.so.6"
    workload = read_environment([FIXTURES / "public_stacks_gperftools663_gstack_spinlock.txt"]).workloads[0]
    assert workload.cpu_samples == (CodeShare("(program)", "base::internal::SpinLockDelay", "user", 1),)


def test_quoted_gdb_bt_in_a_join() -> None:
    dump = backtrace.parse(read("public_stacks_btop47_quoted_bt.txt"))
    (stack,) = dump.stacks
    assert stack.state == "futex" and stack.thread is None and len(stack.frames) == 7
    caller = stack.caller()
    assert caller is not None and caller.function == "clean_quit"


def test_stacks_refuse_prose() -> None:
    with pytest.raises(NotThisFormat):
        backtrace.parse("the program hangs after ctrl+c\n#1 on my list\n")


def test_hot_code_kinds_of_the_functions_at_the_top() -> None:
    def kind(function: str, mode: str = "kernel") -> str | None:
        found = code.kind_of(CodeShare("[kernel]", function, mode, 1))
        return None if found is None else found.name

    assert kind("do_sched_yield") == "sched-yield" and kind("yield_task_fair") == "sched-yield"
    assert (
        kind("get_futex_key_refs.isra.13") == "futex" and kind("native_queued_spin_lock_slowpath") == "kernel-spin-lock"
    )
    assert kind("_raw_spin_unlock_irq") is None  # where interrupts come back on, not a contended lock
    assert kind("read_hpet") == "clock-read" and kind("clear_page_erms") == "page-faults"
    assert kind("gomp_team_barrier_wait_end", "user") == "user-spin" and kind("cpuidle_enter_state") == "idle"


def test_the_tail_of_a_profile_names_no_code_and_asks_for_its_top() -> None:
    # the tail of a profile: its rows are 0.09-0.15 % of the samples each, whatever kind they are
    diagnosis = diagnose(read_environment([FIXTURES / "public_perf_report_openblas1193_tail_comma.txt"]))
    (tail,) = diagnosis.observations
    assert tail.topic == "profile-tail-collect-next" and diagnosis.findings == ()
    assert tail.evidence[0].value == 1.33 and "head -60" in tail.look_next[0]


# --- /proc and cgroup files -------------------------------------------------------------------------------------


def test_cgroup_cpu_stat_two_blocks_the_last_is_read() -> None:
    report = cgroup_cpu.parse(read("public_cgroup_cpu_stat_k0s4954_throttled.txt"))
    assert (report.blocks, report.periods, report.throttled_periods) == (2, 1197, 496)
    assert report.throttled_seconds == 395.384834 and report.system_seconds == 8.083877
    assert report.limit_cores is None
    (finding,) = diagnose(read_environment([FIXTURES / "public_cgroup_cpu_stat_k0s4954_throttled.txt"])).findings
    assert finding.cause.value == "cpu-throttling"
    assert finding.evidence[0].value == pytest.approx(100 * 496 / 1197, abs=1e-3)


def test_cgroup_v1_cpu_stat_in_nanoseconds_and_cpu_max() -> None:
    report = cgroup_cpu.parse(read("public_cgroup_cpu_stat_netdata12595_v1.txt"))
    assert (report.periods, report.throttled_periods, report.throttled_seconds) == (7, 2, 0.127918677)
    assert report.user_seconds is None
    limited = cgroup_cpu.parse("$ cat cpu.max\n150000 100000\n$ cat cpu.stat\nnr_periods 10\nnr_throttled 1\n")
    assert limited.limit_cores == 1.5
    assert cgroup_cpu.parse("cat cpu.max\nmax 100000\ncat cpu.stat\nnr_periods 1\nnr_throttled 0\n").limit_cores is None


def test_pressure_files_after_prompts_and_as_grep_prints_them() -> None:
    report = pressure.parse(read("public_pressure_flatcar638_cat_prompts.txt"))
    assert [(line.resource, line.kind) for line in report.lines] == [
        ("cpu", "some"), ("io", "some"), ("io", "full"), ("memory", "some"), ("memory", "full"),
    ]  # fmt: skip
    node = read_environment([FIXTURES / "public_pressure_node_exporter1174_grep_n.txt"]).node
    assert node.pressure_waiting_seconds == {"cpu": 1167.162866, "io": 61.955081, "memory": 0.0}
    assert node.pressure_stalled_seconds == {"io": 58.578187, "memory": 0.0}


def test_pressure_lines_without_their_file_are_kept_but_not_placed() -> None:
    report = pressure.parse(read("public_pressure_procfs40_unnamed.txt"))
    assert [(line.resource, line.avg10) for line in report.lines] == [(None, 70.24), (None, 57.59)]
    facts = read_environment([FIXTURES / "public_pressure_procfs40_unnamed.txt"])
    assert facts.node.pressure_waiting_seconds is None
    assert any("resource unknown" in note for note in facts.notes)
    quoted = pressure.parse(read("public_pressure_atop72_quoted.txt"))
    assert [(line.kind, line.avg10, line.total) for line in quoted.lines] == [("some", 2.04, 157656722)]


def test_proc_status_elided_grepped_and_prefixed() -> None:
    elided = proc_status.parse(read("public_proc_status_readitlater11567_elided.txt"))
    assert (elided.name, elided.threads, elided.cpus_allowed) == ("mybin", 5, 48)
    assert elided.affinity == tuple(range(48)) and elided.skipped == 2  # the prompt and `...`
    grepped = proc_status.parse(read("public_proc_status_gopsutil14_grep.txt"))
    assert (grepped.voluntary_switches, grepped.involuntary_switches, grepped.threads) == (6067815355, 21817401, None)
    prefixed = proc_status.parse(read("public_proc_status_rr3286_ctest_prefix_cut.txt"))
    assert (prefixed.pid, prefixed.name, prefixed.threads) == (3146531, "compress data", 12)
    assert prefixed.cpus_allowed is None  # cut before Cpus_allowed_list
    workload = read_environment([FIXTURES / "public_proc_status_readitlater11567_elided.txt"]).workloads[0]
    assert (workload.threads, workload.cpus_allowed, workload.voluntary_switches) == (5, 48.0, 2849002)
    assert proc_status.cpu_list("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)


def test_clocksource_files_after_cat_prompts() -> None:
    facts = read_environment([FIXTURES / "public_clocksource_pyinstrument270_cat_prompts.txt"])
    assert (facts.node.clocksource, facts.node.available_clocksources) == ("hpet", ("hpet", "acpi_pm"))
    only = read_environment([FIXTURES / "public_clocksource_neon1480_available_only.txt"]).node
    assert (only.clocksource, only.available_clocksources) == (None, ("hpet", "acpi_pm"))
    diagnosis = diagnose(read_environment([FIXTURES / "public_clocksource_neon1480_available_only.txt"]))
    (observation,) = diagnosis.observations
    assert observation.topic == "clocksource-without-vdso" and "hpet and acpi_pm" in observation.summary


def test_recorded_perf_report_with_children_and_call_graphs() -> None:
    report = perf_report.parse(read("recorded_perf_report_yield_children_callgraph.txt"))
    first = report.rows[0]
    assert (first.children, first.percent, first.comm, first.symbol) == (
        76.59, 0.0, "python3", "entry_SYSCALL_64_after_hwframe",
    )  # fmt: skip
    assert report.samples == 1000 and report.event == "cpu-clock:ppp"
    flat = perf_report.parse(read("recorded_perf_report_yield_dso_sym.txt"))
    assert [(row.dso, row.symbol, row.percent) for row in flat.rows[:2]] == [
        ("[kernel.kallsyms]", "finish_task_switch.isra.0", 37.14), ("[kernel.kallsyms]", "do_sched_yield", 11.63),
    ]  # fmt: skip
    # the call graph's lines are read past: the self shares of either report add up to all samples
    assert sum(row.percent for row in report.rows) == pytest.approx(100, abs=0.5)
    assert sum(row.percent for row in flat.rows) == pytest.approx(100, abs=0.5)


def test_a_saved_report_keeps_the_samples_and_sites(tmp_path: Path) -> None:
    for name in ("public_perf_report_hhvm5081_futex.txt", "public_stacks_openblas4496_yield_quoted.txt"):
        diagnosis = diagnose(read_environment([FIXTURES / name]))
        saved = tmp_path / f"{name}.json"
        saved.write_text(json.dumps(to_json(diagnosis)))
        again = diagnose(read_environment([saved]))
        assert again.facts.workloads[0].cpu_samples == diagnosis.facts.workloads[0].cpu_samples
        assert again.facts.workloads[0].cpu_samples_total == diagnosis.facts.workloads[0].cpu_samples_total
        assert again.facts.workloads[0].yield_sites == diagnosis.facts.workloads[0].yield_sites
        assert again.facts.workloads[0].stacks == diagnosis.facts.workloads[0].stacks
        said = [*(o.topic for o in diagnosis.observations), *(f.cause.value for f in diagnosis.findings)]
        assert [*(o.topic for o in again.observations), *(f.cause.value for f in again.findings)] == said != []


def test_folded_stacks_of_py_spy_with_an_elided_frame() -> None:
    report = folded.parse(read("public_folded_pyspy179_gevent_raw.txt"))
    assert [stack.count for stack in report.stacks] == [1, 499, 500] and report.elided_frames == 1
    assert report.stacks[0].frames[-1].function == "handle" and report.stacks[0].frames[-1].library == "base_async.py"
    assert diagnose(read_environment([FIXTURES / "public_folded_pyspy179_gevent_raw.txt"])).observations == ()


def test_recorded_py_spy_native_names_the_python_function_that_yields() -> None:
    report = folded.parse(read("recorded_folded_pyspy_native_yield.txt"))
    assert sum(stack.count for stack in report.stacks) == 502 and len(report.stacks) == 16
    workload = read_environment([FIXTURES / "recorded_folded_pyspy_native_yield.txt"]).workloads[0]
    assert workload.cpu_samples_total == 502
    assert workload.yield_sites == (CodeShare("y.py", "spin", "user", 458),)
    assert workload.cpu_samples is not None and workload.cpu_samples[0].function == "sched_yield"
    assert workload.cpu_samples[0].count == 443  # the leaf frames named sched_yield, in libc


def test_recorded_kernel_stack_of_a_thread_blocked_on_a_lock() -> None:
    (stack,) = backtrace.parse(read("recorded_stacks_proc_stack_futex.txt")).stacks
    assert stack.state == "futex" and len(stack.frames) == 7 and stack.caller() is None
    assert [frame.function for frame in stack.frames[:2]] == ["futex_do_wait", "__futex_wait"]
    assert {frame.library for frame in stack.frames} == {"[kernel]"}
    sleeping = backtrace.parse("[<0>] hrtimer_nanosleep+0xb5/0x130\n[<0>] common_nsleep+0x30/0x60\n").stacks[0]
    assert sleeping.state == "sleep"


def test_proc_sched_with_and_without_schedstats() -> None:
    plain = proc_sched.parse(read("public_proc_sched_wca533_systemd.txt"))
    assert (plain.comm, plain.pid, plain.threads, plain.run_ms) == ("systemd", 1, 1, 236416.940623)
    assert (plain.voluntary_switches, plain.involuntary_switches, plain.wait_ms) == (897030, 1756, None)
    cut = proc_sched.parse(read("public_proc_sched_mytools1_ksoftirqd_cut.txt"))
    assert (cut.comm, cut.pid, cut.run_ms, cut.wait_ms) == ("ksoftirqd/21", 100, 356.127446, None)
    assert cut.skipped == 2  # the prompt and the wait_sum line cut before its value
    waited = proc_sched.parse("a (7, #threads: 3)\n---\nse.sum_exec_runtime : 10.0\nse.statistics.wait_sum : 2500.5\n")
    workload = proc_sched.to_facts(waited, "x").workload
    assert workload is not None and workload.runqueue_wait_seconds == 2.5005 and workload.threads == 3


def test_the_new_formats_combine_in_one_environment() -> None:
    names = (
        "recorded_folded_pyspy_native_yield.txt",
        "public_proc_status_readitlater11567_elided.txt",
        "public_cgroup_cpu_stat_netdata12595_v2.txt",
    )
    facts = read_environment([FIXTURES / name for name in names])
    (workload,) = facts.workloads
    assert (workload.threads, workload.cpus_allowed, workload.periods, workload.user_seconds) == (5, 48.0, 7, 0.027213)
    assert workload.cpu_samples_total == 502 and workload.yield_sites == (CodeShare("y.py", "spin", "user", 458),)
    assert [observation.topic for observation in diagnose(facts).observations] == ["hot-code-sched-yield", "yield-site"]


# --- inclusive shares: perf report --children, and stacks that show what a call entered ------------------------


def test_children_columns_name_the_call_that_enters_the_scheduler() -> None:
    """Three Python threads calling os.sched_yield: self shares put 43 % in the scheduler, but 58.45 % of the
    samples are inside __sched_yield with what it calls (the Children column): the yields are named."""
    report = perf_report.parse(read("recorded_perf_report_yield_children_callgraph.txt"))
    row = next(row for row in report.rows if row.symbol == "__sched_yield")
    assert (row.children, row.percent) == (58.45, 5.92)
    (observation,) = diagnose(
        read_environment([FIXTURES / "recorded_perf_report_yield_children_callgraph.txt"])
    ).observations
    assert observation.topic == "hot-code-sched-yield"
    assert observation.evidence[0].fact == "on-CPU samples in sched-yield code and the code it calls"
    assert observation.evidence[0].value == 58.45


def test_children_rows_without_their_header_a_samples_column_and_empty_srclines() -> None:
    report = perf_report.parse(read("public_perf_report_jj9708_children_page_fault_cut.txt"))
    assert [(row.children, row.percent, row.symbol, row.dso) for row in report.rows[:3]] == [
        (99.81, 0.0, "asm_exc_page_fault", None),
        (99.81, 0.0, "exc_page_fault", None),
        (99.80, 0.03, "do_user_addr_fault", None),
    ]
    (observation,) = diagnose(
        read_environment([FIXTURES / "public_perf_report_jj9708_children_page_fault_cut.txt"])
    ).observations
    assert observation.topic == "hot-code-page-faults" and observation.evidence[0].value == 99.81
    # the rows shown hold 0.04 % of the samples by self share: their kernel share would say nothing of the profile
    assert "kernel code" not in observation.summary and len(observation.evidence) == 1


def shares(*rows: tuple[str, str, float, float | None]) -> tuple[CodeShare, ...]:
    return tuple(CodeShare("[kernel]", function, "kernel", count, inclusive=inclusive) for function, _, count, inclusive
                 in rows)  # fmt: skip


def test_the_entry_code_and_the_scheduler_are_never_named_by_their_inclusive_share() -> None:
    """Every system call runs under entry_SYSCALL_64 and every blocking call under __schedule: their inclusive
    shares name no call. Only yield, futex and page-fault code count theirs."""
    from agent.diagnosis.facts import Workload, WorkloadView

    rows = shares(("entry_SYSCALL_64_after_hwframe", "", 0.0, 95.0), ("__schedule", "", 30.0, 80.0),
                  ("do_futex", "", 5.0, 25.0), ("memcpy", "", 65.0, None))  # fmt: skip
    workload = WorkloadView(ref=Workload(), cpu_samples=rows, cpu_samples_total=100.0)
    (observation,) = code.observations(workload)
    assert observation.topic == "hot-code-scheduler" and observation.evidence[0].value == 30.0
    rows = (*rows[:2], CodeShare("[kernel]", "do_futex", "kernel", 5.0, inclusive=45.0), rows[3])
    (observation,) = code.observations(WorkloadView(ref=Workload(), cpu_samples=rows, cpu_samples_total=100.0))
    assert observation.topic == "hot-code-futex" and observation.evidence[0].value == 45.0


def test_a_call_graph_of_perf_report_goes_through_the_stack_classifier() -> None:
    """perf report -g: each row's first chain (printed from the root down here: reversed), the row its leaf."""
    report = perf_report.parse(read("public_perf_report_liburing218_comm_callgraph_cut.txt"))
    graphed = [row for row in report.rows if row.callers]
    assert graphed and graphed[0].callers == ("do_syscall_64", "entry_SYSCALL_64_after_hwframe")
    stacks = read_environment([FIXTURES / "public_perf_report_liburing218_comm_callgraph_cut.txt"]).workloads[0].stacks
    assert (
        stacks is not None
        and stacks.unit == "profile rows"
        and stacks.total == pytest.approx(sum(row.percent for row in report.rows))
    )
