"""Every artifact fixture (and the sets of one run taken together) through `analyze`'s path: facts -> the rules ->
the expected outcome, and the same table in docs/analyze.md. The seed case named with its numbers and fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.diagnosis.findings import Cause, Diagnosis, Mechanism
from agent.diagnosis.inputs.artifacts import OfflineError, read_environment
from agent.diagnosis.rules import diagnose
from tests.support.agent import REPO
from tests.unit.locations import UNIT_FIXTURES

FIXTURE_DIRS = (UNIT_FIXTURES / "artifacts", UNIT_FIXTURES / "analyze")
DOCS = REPO / "docs" / "analyze.md"
POOL_STORM = "thread-pool-oversubscription / yield-storm"
POOL_UNCHECKED = "could not check thread-pool-oversubscription"
SYSTEM_TIME = "observation system-time-unexplained"
KERNEL_NEXT = "observation kernel-time-collect-next"
OTHER_LOAD = "run-queue-saturation / other-load"
RUN = ("perf_trace_s", "top_b", "mpstat", "vmstat", "pidstat_t")  # one recorded run, every tool

# files -> what the rules conclude: findings, rules that could not decide, observations; "none"; "error" (the
# tool printed an error instead of a report). docs/analyze.md holds the same table with the reasons.
EXPECTED: dict[tuple[str, ...], str] = {
    ("baremetal_perf_trace_s.txt",): "none",
    ("clock_perf_trace_s.txt",): "observation clock-reads-in-kernel",
    ("clock_strace_fc.txt",): "observation clock-reads-in-kernel",
    ("clock_top_b.txt",): SYSTEM_TIME,
    ("clock_vmstat.txt",): SYSTEM_TIME,
    ("error_mpstat_usage.txt",): "error",
    ("error_perf_trace_nonroot.txt",): "error",
    ("error_strace_attach.txt",): "error",
    ("error_top_notty.txt",): "error",
    ("error_vmstat_delay.txt",): "error",
    ("gcp_perf_trace_s.txt",): POOL_STORM,
    ("gcp_top.txt",): f"{SYSTEM_TIME}, observation workers-use-several-cpus",
    ("gomp_perf_trace_s.txt",): "none",
    ("gomp_pidstat_t.txt",): POOL_UNCHECKED,
    ("gomp_strace_fc.txt",): "none",
    ("gomp_top_Hb.txt",): "none",
    ("gomp_top_b.txt",): "none",
    ("gomp_top_b_de.txt",): "none",
    ("healthy_mpstat.txt",): SYSTEM_TIME,
    ("healthy_perf_trace_s.txt",): "none",
    ("healthy_pidstat_h_uwt.txt",): "none",
    ("healthy_pidstat_t.txt",): POOL_UNCHECKED,
    ("healthy_strace_cwf.txt",): "none",
    ("healthy_strace_fc.txt",): "none",
    ("healthy_top_Hb.txt",): SYSTEM_TIME,
    ("healthy_top_b.txt",): SYSTEM_TIME,
    ("healthy_vmstat.txt",): "none",
    ("i386_strace_fc.txt",): "none",
    ("pidstat_no_such_pid.txt",): "none",
    ("public_mpstat_pcp1922_ampm.txt",): "none",
    ("public_pidstat_sysstat149_u.txt",): "none",
    ("public_pidstat_sysstat176_v11.txt",): "none",
    ("public_pidstat_sysstat344_ut_zh.txt",): "none",
    ("public_strace_issue95_fc.txt",): "none",
    ("public_strace_nomad8163_yield.txt",): "observation yield-calls-collect-next",
    ("public_top_cinnamon_pr1623_dsleep.txt",): "none",
    ("public_top_psutil1210_header_only.txt",): "none",
    ("public_top_test4_issue11_fpm.txt",): SYSTEM_TIME,
    ("public_top_zhangyachen_issue64_procps3.txt",): "none",
    ("sick_mpstat.txt",): "none",
    ("sick_mpstat_de.txt",): SYSTEM_TIME,
    ("sick_perf_trace_s.txt",): POOL_STORM,
    ("sick_perf_trace_s_m1_lost.txt",): POOL_STORM,
    ("sick_pidstat_t.txt",): POOL_UNCHECKED,
    ("sick_pidstat_wut_ampm.txt",): POOL_UNCHECKED,
    ("sick_strace_cw.txt",): "none",
    ("sick_strace_fc.txt",): POOL_UNCHECKED,
    ("sick_strace_fc_de.txt",): POOL_UNCHECKED,
    ("sick_top_Hb.txt",): "none",
    ("sick_top_b.txt",): SYSTEM_TIME,
    ("sick_top_interactive_ansi.txt",): "none",
    ("sick_vmstat.txt",): SYSTEM_TIME,
    ("sick_vmstat_de.txt",): "none",
    ("sleeper_perf_trace_s.txt",): "none",
    ("sleeper_perf_trace_s_faults_sched.txt",): "none",
    ("sleeper_strace_fc.txt",): "none",
    ("sleeper_vmstat_wt.txt",): SYSTEM_TIME,
    # public time outputs: CPU time by mode cannot prove a cause; the kernel's share says what to collect next
    ("public_time_bash_hyperfine515.txt",): KERNEL_NEXT,
    ("public_time_bash_pytom158_comma.txt",): KERNEL_NEXT,
    ("public_time_bsd_dotfiles60.txt",): KERNEL_NEXT,
    ("public_time_v_borg2196.txt",): KERNEL_NEXT,
    ("public_time_zsh_illumos107.txt",): "observation cpu-time-implausible",
    ("public_time_zsh_bracketedpaste24.txt",): "none",
    ("public_perf_stat_vim1089_de.txt",): "none",
    # public kernel lines about the clock source: never a contention cause
    ("public_dmesg_clocksource_arpl244_kernlog.txt",): "observation clocksource-tsc-unstable",
    ("public_dmesg_clocksource_corefreq308_hpet.txt",): "observation clocksource-without-vdso",
    ("public_dmesg_clocksource_madgraph116_tsc_early.txt",): "observation clocksource-tsc-unstable",
    ("public_dmesg_clocksource_mkt74_nested.txt",): "observation clocksource-without-vdso",
    ("public_dmesg_clocksource_propolis328_acpi_pm.txt",): "observation clocksource-without-vdso",
    ("public_dmesg_clocksource_sozu500_hpet.txt",): "observation clocksource-without-vdso",
    ("public_perf_report_hhvm5081_futex.txt",): "observation hot-code-futex",
    ("public_perf_report_openblas1193_tail_comma.txt",): "observation profile-tail-collect-next",
    ("public_perf_report_qat32_old_samples.txt",): "observation hot-code-kernel-spin-lock",
    ("public_perf_top_dynamorio4279_cut.txt",): "observation hot-code-collect-next",
    ("public_perf_top_liquorix56_perftop.txt",): "observation hot-code-collect-next",
    ("public_stacks_btop47_quoted_bt.txt",): "observation futex-site",
    ("public_stacks_fio1934_condwait_cut.txt",): "observation futex-site",
    ("public_stacks_gperftools663_gstack_spinlock.txt",): "allocator-contention / allocator-lock",
    ("public_stacks_openblas4496_yield_quoted.txt",): POOL_STORM,
    ("public_cgroup_cpu_stat_k0s4954_throttled.txt",): "cpu-throttling / quota",
    ("public_cgroup_cpu_stat_netdata12595_v1.txt",): "none",
    ("public_cgroup_cpu_stat_netdata12595_v2.txt",): "none",
    ("public_clocksource_neon1480_available_only.txt",): "observation clocksource-without-vdso",
    ("public_clocksource_pyinstrument270_cat_prompts.txt",): "observation clocksource-without-vdso",
    ("public_pressure_atop72_quoted.txt",): "none",
    ("public_pressure_flatcar638_cat_prompts.txt",): "none",
    ("public_pressure_node_exporter1174_grep_n.txt",): "none",
    ("public_pressure_procfs40_unnamed.txt",): "none",
    ("public_proc_status_gopsutil14_grep.txt",): "none",
    ("public_proc_status_readitlater11567_elided.txt",): "none",
    ("public_proc_status_rr3286_ctest_prefix_cut.txt",): "none",
    ("public_perf_stat_llvm195239_metric_names.txt",): "observation user-cpu-collect-next",
    ("public_perf_stat_netdata_kc247_fenced.txt",): "none",
    ("public_stacks_bdwgc249_thread_switching.txt",): "observation stacks-waiting-owner-unknown",
    ("public_stacks_memray336_named_thread_cut.txt",): "observation futex-site",
    ("public_proc_status_processexporter51_cut.txt",): "none",
    ("public_strace_neon1480_gettimeofday.txt",): "observation clock-reads-in-kernel",
    ("public_strace_pyinstrument270_clock_comma.txt",): "observation clock-reads-in-kernel",
    ("public_time_bash_greenmetrics524_root_prompt.txt",): "none",
    ("public_proc_status_smc212_many_files_cut.txt",): "none",
    ("recorded_perf_report_yield_children_callgraph.txt",): "observation hot-code-sched-yield",
    ("recorded_perf_report_yield_dso_sym.txt",): "observation hot-code-scheduler",
    ("public_folded_pyspy179_gevent_raw.txt",): "none",
    ("recorded_folded_pyspy_native_yield.txt",): "observation hot-code-sched-yield, observation yield-site",
    ("recorded_stacks_proc_stack_futex.txt",): "none",
    ("public_proc_sched_mytools1_ksoftirqd_cut.txt",): "none",
    ("public_proc_sched_wca533_systemd.txt",): "none",
    # perf script, bcc, bpftrace, py-spy dump, /proc/stat, /proc/softirqs, /proc/vmstat (and more stacks and profiles)
    ("public_bcc_profile_bcc3782_libbpf_kernel.txt",): "none",
    ("public_bcc_profile_bcc617_addresses_idle.txt",): "observation hot-code-idle",
    ("public_bcc_stackcount_bcc1613_verbose_cut.txt",): "none",
    ("public_bcc_stackcount_bcc3614_bold_count.txt",): "none",
    ("public_bcc_stackcount_bcc730_pid_first.txt",): "none",
    ("public_bpftrace_heidsoft140_pid_comm_syscalls.txt",): "none",
    ("public_folded_bcc3389_offwaketime_wrapped.txt",): "none",
    ("public_perf_report_jj9708_children_page_fault_cut.txt",): "observation hot-code-page-faults",
    ("public_perf_report_liburing218_comm_callgraph_cut.txt",): "observation profile-tail-collect-next",
    ("public_perf_script_cpuprofilify2_node_start_cut.txt",): "none",
    ("public_perf_script_node50079_ci_prefix_cut.txt",): "none",
    ("public_perf_script_pyspy390_ptrace_tracepoint.txt",): "none",
    ("public_perf_script_scylla12181_cxx_cut.txt",): "none",
    ("public_perf_script_scylla1909_no_backtrace_cut.txt",): "none",
    ("public_perf_top_system76sched47_syscall_exit_cut.txt",): "observation hot-code-syscall-entry",
    ("public_proc_stat_centreon3979_head_cut.txt",): "none",
    ("public_proc_stat_gvisor1336_zeros.txt",): "none",
    ("public_proc_stat_procfs50_centos6_cut.txt",): "none",
    ("public_proc_vmstat_collectd1307_sorted_cut.txt",): "observation memory-reclaim",
    ("public_proc_vmstat_oshi1202_cut.txt",): "none",
    ("public_pyspy_dump_gprofiler612_hang_cut.txt",): "observation futex-site",
    ("public_pyspy_dump_ha32876_active_cut.txt",): "none",
    ("public_pyspy_dump_ha38120_usage_above_cut.txt",): "none",
    ("public_pyspy_dump_ha40292_idle_cut.txt",): "none",
    ("public_pyspy_dump_ha66389_example_cut.txt",): "none",
    ("public_pyspy_dump_pyspy221_uwsgi_no_frames.txt",): "none",
    ("public_stacks_pytorch52916_blas_idle_cut.txt",): "observation futex-site",
    ("public_stacks_pytorch75147_iomp_lock_cut.txt",): "observation futex-site",
    ("public_stacks_pytorch7896_iomp_wrapped_cut.txt",): "observation futex-site",
    ("public_time_zsh_jj9708_system.txt",): KERNEL_NEXT,
    ("recorded_bcc_profile_python_yielders.txt",): "observation hot-code-sched-yield",
    ("recorded_bcc_stackcount_yield_tracepoint.txt",): "none",
    ("recorded_bpftrace_comm_yields.txt",): "none",
    ("recorded_bpftrace_profile_python_yielders.txt",): "observation hot-code-sched-yield",
    ("recorded_bpftrace_ustack_kstack_yielder.txt",): "none",
    ("recorded_perf_script_yield.txt",): "observation hot-code-scheduler",
    ("recorded_perf_script_yield_callchain.txt",): "observation hot-code-futex, observation yield-site",
    ("recorded_perf_script_yield_tracepoint.txt",): "observation yield-site",
    ("recorded_proc_softirqs.txt",): "observation softirqs-on-one-cpu",
    ("recorded_proc_softirqs_udp_flood.txt",): "observation softirqs-on-one-cpu",
    ("recorded_proc_stat.txt",): "none",
    ("recorded_proc_stat_loop_cpu0.txt",): "none",
    ("recorded_proc_vmstat.txt",): "none",
    ("recorded_proc_vmstat_memcg_churn.txt",): "none",
    ("recorded_pyspy_dump_native_yielders.txt",): "observation yield-site, observation futex-site",
    ("recorded_pyspy_dump_yielders.txt",): "none",
    # issue 34: new formats, stacks read by the classifier, run-queue waits
    ("public_bcc_hist_cpudist_bcc3924_tm_cut.txt",): "none",
    ("public_bcc_hist_cpudist_bcc4131_extension_cut.txt",): "none",
    ("public_bcc_hist_cpudist_bcc585_basic.txt",): "none",
    ("public_bcc_hist_runqlat_bcc1732_idle_cut.txt",): "none",
    ("public_gdb_threads_logcabin213_lll_lock_cut.txt",): "observation stacks-waiting-owner-unknown",
    ("public_gdb_threads_torque59_lll_lock_cut.txt",): "observation stacks-waiting-owner-unknown",
    ("public_perf_sched_latency_tikv2473_cut.txt",): "observation runqueue-delays",
    ("public_proc_interrupts_armbian2117_fence_cut.txt",): "none",
    ("public_pyspy_top_pyspy737_logging_acquire_cut.txt",): "none",
    ("public_stacks_codyco112_openblas_yield_cut.txt",): POOL_STORM,
    ("public_stacks_openblas660_exec_blas_yield.txt",): "observation yield-site",
    ("recorded_bpftrace_hist_runqlat_victim_alone.txt",): "none",
    ("recorded_bpftrace_hist_runqlat_victim_beside_hogs.txt",): "could not check run-queue-saturation",
    ("recorded_gdb_info_threads_numpy2_pool.txt",): "thread-pool-oversubscription / user-space-spin",
    ("recorded_perf_lock_contention_convoy.txt",): "none",
    ("recorded_perf_lock_report_empty.txt",): "none",
    ("recorded_perf_sched_latency_victim_alone.txt",): "observation runqueue-delays",
    ("recorded_perf_sched_latency_victim_beside_hogs.txt",): "observation runqueue-delays",
    ("recorded_perf_sched_timehist_s_victim_beside_hogs.txt",): "none",
    ("recorded_pidstat_victim_alone.txt",): "none",
    ("recorded_pidstat_victim_beside_hogs.txt",): "none",
    ("recorded_proc_interrupts.txt",): "none",
    ("recorded_stacks_gdb_lock_convoy.txt",): "futex-contention / lock-convoy",
    ("recorded_stacks_gdb_lock_convoy_bt_full.txt",): "futex-contention / lock-convoy",
    # one environment, several files
    ("gcp_perf_trace_s.txt", "gcp_top.txt"): POOL_STORM,
    ("clock_perf_trace_s.txt", "clock_vmstat.txt"): SYSTEM_TIME,
    ("clock_strace_fc.txt", "clock_vmstat.txt"): SYSTEM_TIME,
    tuple(f"sick_{tool}.txt" for tool in RUN): POOL_STORM,
    tuple(f"healthy_{tool}.txt" for tool in RUN): f"{POOL_UNCHECKED}, {SYSTEM_TIME}",
    ("sick_strace_fc.txt", "sick_pidstat_t.txt"): POOL_UNCHECKED,
    ("gomp_perf_trace_s.txt", "gomp_pidstat_t.txt", "gomp_top_b.txt"): POOL_UNCHECKED,
    ("recorded_bpftrace_hist_runqlat_victim_beside_hogs.txt", "recorded_pidstat_victim_beside_hogs.txt"): OTHER_LOAD,
    ("recorded_bpftrace_hist_runqlat_victim_beside_hogs.txt", "recorded_pidstat_victim_beside_hogs.txt",
     "recorded_perf_sched_latency_victim_beside_hogs.txt"): OTHER_LOAD,
    ("recorded_bpftrace_hist_runqlat_victim_alone.txt", "recorded_pidstat_victim_alone.txt"): "none",
}  # fmt: skip


def outcome(diagnosis: Diagnosis) -> str:
    items = [f"{finding.cause.value} / {finding.mechanism.value}" for finding in diagnosis.findings]
    items += [f"could not check {unchecked.rule.value}" for unchecked in diagnosis.unchecked]
    items += [f"observation {observation.topic}" for observation in diagnosis.observations]
    return ", ".join(items) or "none"


def fixture(name: str) -> Path:
    (found,) = [directory / name for directory in FIXTURE_DIRS if (directory / name).exists()]
    return found


def analyzed(*names: str) -> Diagnosis:
    return diagnose(read_environment([fixture(name) for name in names]))


@pytest.mark.parametrize("names", list(EXPECTED), ids=lambda names: "+".join(names))
def test_fixture_outcome(names: tuple[str, ...]) -> None:
    if EXPECTED[names] == "error":
        with pytest.raises(OfflineError, match="printed an error instead of a report"):
            analyzed(*names)
        return
    assert outcome(analyzed(*names)) == EXPECTED[names]


def test_every_fixture_has_an_expected_outcome() -> None:
    files = {path.name for directory in FIXTURE_DIRS for path in directory.glob("*.txt")}
    assert files == {names[0] for names in EXPECTED if len(names) == 1}


def test_the_docs_table_is_this_table() -> None:
    section = DOCS.read_text(encoding="utf-8").split("## Every fixture and its outcome", 1)[1]
    rows = re.findall(r"^\| ((?:`[^`]+`(?: \+ )?)+) \| ([^|]+) \|", section, re.MULTILINE)
    documented = {tuple(re.findall(r"`([^`]+)`", files)): expected.strip() for files, expected in rows}
    assert documented == EXPECTED


def test_seed_gcp_names_the_pool_storm_with_its_numbers_and_the_fix() -> None:
    diagnosis = analyzed("gcp_perf_trace_s.txt", "gcp_top.txt")
    (finding,) = diagnosis.findings
    assert (finding.cause, finding.mechanism) == (Cause.THREAD_POOL_OVERSUBSCRIPTION, Mechanism.YIELD_STORM)
    evidence = {item.fact: item.value for item in finding.evidence}
    assert evidence["threads spinning in sched_yield"] == 16
    per_thread = next(value for fact, value in evidence.items() if fact.startswith("sched_yield calls per"))
    assert per_thread == (5_434_655 + 5_475_608) / 2  # the median of the 16 spinning threads' calls (5.05-5.90 M)
    longest = next(value for fact, value in evidence.items() if fact.startswith("longest futex wait"))
    assert longest == pytest.approx(21.99, abs=0.01)
    fix = " ".join((finding.fix.summary, *finding.fix.steps))
    assert "OPENBLAS_NUM_THREADS" in fix and "OMP_NUM_THREADS" in fix and "threadpool_limits" in fix


def test_seed_bare_metal_has_no_pool_finding() -> None:
    diagnosis = analyzed("baremetal_perf_trace_s.txt")
    assert not any(finding.cause is Cause.THREAD_POOL_OVERSUBSCRIPTION for finding in diagnosis.findings)


def test_system_time_from_clock_reads_is_an_observation_never_a_contention_finding() -> None:
    """Two threads reading the clock through the system call: high system time, no yield or futex storm."""
    diagnosis = analyzed("clock_perf_trace_s.txt", "clock_vmstat.txt")
    assert diagnosis.findings == ()
    (observation,) = diagnosis.observations
    assert observation.topic == "system-time-unexplained"
    assert observation.evidence[0].value == pytest.approx((23 + 27 + 25 + 36) / 4)
    (workload,) = diagnosis.facts.workloads
    assert workload.syscall_seconds is not None
    assert workload.syscall_seconds["clock_gettime"] == pytest.approx(0.538358 + 0.602568)
    assert workload.sched_yield_calls == 0  # perf saw every call of the three threads: none was a yield
