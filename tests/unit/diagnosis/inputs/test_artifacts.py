"""The artifact parsers on real output: the seed case's posted files, output recorded here on the scenario
workloads, and output posted in public issue threads (sources in fixtures/artifacts/README.md).

Expected values are read off the fixture files by eye; each test names the file it checks.
"""

from __future__ import annotations

import doctest
import re
import signal
from pathlib import Path

import pytest

from agent.diagnosis.inputs import artifacts
from agent.diagnosis.inputs.artifacts import (
    backtrace,
    bcc_stacks,
    bpftrace_maps,
    cgroup_cpu,
    clocksource,
    folded,
    gdb_threads,
    histograms,
    load,
    mpstat,
    perf_lock,
    perf_report,
    perf_sched,
    perf_script,
    perf_stat,
    perf_trace,
    pidstat,
    pressure,
    proc_interrupts,
    proc_sched,
    proc_softirqs,
    proc_stat,
    proc_status,
    proc_vmstat,
    pyspy_dump,
    pyspy_top,
    read_environment,
    strace,
    time_output,
    top,
    vmstat,
)
from agent.diagnosis.inputs.artifacts.backtrace import StackDump
from agent.diagnosis.inputs.artifacts.bcc_stacks import BccStacks
from agent.diagnosis.inputs.artifacts.bpftrace_maps import BpftraceMaps
from agent.diagnosis.inputs.artifacts.cgroup_cpu import CgroupCpu
from agent.diagnosis.inputs.artifacts.clocksource import ClocksourceReport
from agent.diagnosis.inputs.artifacts.errors import ArtifactError, CommandFailed, Malformed, NotThisFormat
from agent.diagnosis.inputs.artifacts.folded import FoldedReport
from agent.diagnosis.inputs.artifacts.formats import detect_format
from agent.diagnosis.inputs.artifacts.mpstat import MpstatReport
from agent.diagnosis.inputs.artifacts.perf_report import PerfReport
from agent.diagnosis.inputs.artifacts.perf_script import PerfScript
from agent.diagnosis.inputs.artifacts.perf_stat import PerfStatReport
from agent.diagnosis.inputs.artifacts.perf_trace import PerfTraceSummary
from agent.diagnosis.inputs.artifacts.pidstat import PidstatReport
from agent.diagnosis.inputs.artifacts.pressure import PressureReport
from agent.diagnosis.inputs.artifacts.proc_sched import ProcSched
from agent.diagnosis.inputs.artifacts.proc_softirqs import ProcSoftirqs
from agent.diagnosis.inputs.artifacts.proc_stat import ProcStat
from agent.diagnosis.inputs.artifacts.proc_status import ProcStatus
from agent.diagnosis.inputs.artifacts.proc_vmstat import ProcVmstat
from agent.diagnosis.inputs.artifacts.pyspy_dump import PySpyDump
from agent.diagnosis.inputs.artifacts.strace import StraceSummary
from agent.diagnosis.inputs.artifacts.text import docstring_sample
from agent.diagnosis.inputs.artifacts.time_output import TimeReport
from agent.diagnosis.inputs.artifacts.top import CpuStates, TaskCounts, TopReport, TopRow
from agent.diagnosis.inputs.artifacts.vmstat import VmstatReport
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"
PARSERS = (
    perf_trace, strace, top, pidstat, mpstat, vmstat, time_output, perf_stat, clocksource, perf_report, backtrace,
    proc_status, pressure, cgroup_cpu, folded, proc_sched, perf_script, bcc_stacks, bpftrace_maps, pyspy_dump,
    proc_stat, proc_softirqs, proc_vmstat, histograms, gdb_threads, perf_sched, perf_lock, pyspy_top, proc_interrupts,
)  # fmt: skip


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def perf(name: str) -> PerfTraceSummary:
    return perf_trace.parse(read(name))


def yields(summary: PerfTraceSummary) -> list[int]:
    """sched_yield calls of every thread that made any."""
    return [stat.calls for thread in summary.threads if (stat := thread.syscall("sched_yield")) is not None]


# --- perf trace -s ---------------------------------------------------------------------------------------------


def test_seed_gcp_perf_trace_every_worker_thread_yields_millions_of_times() -> None:
    summary = perf("gcp_perf_trace_s.txt")
    assert len(summary.threads) == 20
    assert not summary.errors_column
    worker = summary.thread(2847)
    assert worker is not None and (worker.comm, worker.events, worker.events_percent) == ("python", 10240661, 6.0)
    yield_row, futex_row = worker.syscall("sched_yield"), worker.syscall("futex")
    assert yield_row is not None and futex_row is not None
    assert (yield_row.calls, yield_row.total_ms, yield_row.max_ms, yield_row.errors) == (5119771, 63387.192, 98.5, None)
    assert (futex_row.calls, futex_row.total_ms, futex_row.max_ms, futex_row.stddev_percent) == (
        2909,
        269175.495,
        21907.964,
        13.7,
    )
    mangled = summary.thread(2848)
    assert mangled is not None and mangled.comm == "ython"  # as posted: perf cut the first letter
    assert yields(summary) == [3232286, 5119771, 5475608, 5046875, 5434655, 5234762, 5523384, 5400121, 5289038,
                               5633482, 5596230, 5618107, 5163708, 5752618, 5505249, 5896062]  # fmt: skip
    first = summary.threads[0]
    assert (first.tid, len(first.syscalls), first.syscalls[-1].name, first.syscalls[-1].calls) == (2551, 10, "fstat", 4)
    idle = summary.thread(2865)
    assert idle is not None and idle.events == 1 and idle.syscalls[0].calls == 1 and idle.syscalls[0].total_ms == 0.0


def test_seed_baremetal_perf_trace_one_thread_per_worker_yields() -> None:
    summary = perf("baremetal_perf_trace_s.txt")
    assert len(summary.threads) == 39
    assert yields(summary) == [39353, 1599811]
    busy = summary.thread(114304)
    assert busy is not None and busy.events == 3210496 and busy.events_percent == 97.3
    futex_row = busy.syscall("futex")
    assert futex_row is not None and (futex_row.calls, futex_row.min_ms, futex_row.max_ms) == (3640, 0.0, 13930.078)
    last = summary.threads[-1]
    assert (last.tid, [(s.name, s.calls) for s in last.syscalls]) == (114341, [("futex", 1)])


def test_recorded_perf_trace_sick_pool_has_errors_column_and_yields() -> None:
    summary = perf("sick_perf_trace_s.txt")  # numpy 1.26, 4 workers, BLAS threads unset, perf 6.1
    assert summary.errors_column and summary.lost_events == 1066 + 153  # perf wrote its LOST lines into the file
    assert len(summary.threads) == 14
    assert summary.threads[0].comm == "bash" and summary.threads[0].tid == 11021
    thread = summary.thread(11028)
    assert thread is not None and thread.events == 21442
    row = thread.syscall("sched_yield")
    assert row is not None
    assert (row.calls, row.errors, row.total_ms, row.min_ms, row.avg_ms, row.max_ms, row.stddev_percent) == (
        9733,
        0,
        1118.112,
        0.002,
        0.115,
        40.202,
        8.18,
    )
    wait4 = summary.threads[0].syscall("wait4")
    assert wait4 is not None and (wait4.calls, wait4.errors, wait4.total_ms) == (2, 1, 4438.510)
    assert len(yields(summary)) == 9 and sum(yields(summary)) == 197197


def test_recorded_perf_trace_that_lost_events() -> None:
    # perf trace -s -m 1 (a one-page buffer) with stdout and stderr in one file: 677 LOST lines, the program's output
    summary = perf("sick_perf_trace_s_m1_lost.txt")
    assert summary.lost_events == 398604
    assert len(summary.threads) == 13 and sum(yields(summary)) == 129620
    first = summary.threads[0]
    assert (first.tid, first.events, [(s.name, s.calls) for s in first.syscalls[:2]]) == (
        25607,
        6314,
        [("futex", 2), ("sched_yield", 3148)],
    )


def test_recorded_perf_trace_healthy_pool_libgomp_and_sleeper_never_yield() -> None:
    healthy, gomp, sleeper = (
        perf("healthy_perf_trace_s.txt"),
        perf("gomp_perf_trace_s.txt"),
        perf("sleeper_perf_trace_s.txt"),
    )
    assert (len(healthy.threads), len(gomp.threads), len(sleeper.threads)) == (9, 3, 2)
    assert yields(healthy) == yields(gomp) == yields(sleeper) == []
    gomp_main = gomp.thread(14209)
    assert gomp_main is not None
    nanosleep = gomp_main.syscall("clock_nanosleep")
    assert nanosleep is not None and (nanosleep.calls, nanosleep.total_ms) == (2570, 1779.941)
    sleeping = sleeper.thread(15817)
    assert sleeping is not None and sleeping.comm == "sleeper"
    nanosleep = sleeping.syscall("clock_nanosleep")
    assert nanosleep is not None
    assert (nanosleep.calls, nanosleep.total_ms, nanosleep.min_ms, nanosleep.max_ms) == (200, 4026.581, 20.039, 24.673)


def test_recorded_perf_trace_thread_line_with_faults_and_run_time() -> None:
    summary = perf("sleeper_perf_trace_s_faults_sched.txt")  # perf trace -s -F all --sched
    (thread,) = summary.threads
    assert (thread.comm, thread.tid, thread.events, thread.events_percent) == ("sleeper", 24630, 81, 75.7)
    assert (thread.majfaults, thread.minfaults, thread.runtime_ms, thread.syscalls) == (None, 61, 1.072, ())


# --- strace -c -------------------------------------------------------------------------------------------------


def test_recorded_strace_f_c_sick_pool() -> None:
    table = strace.parse(read("sick_strace_fc.txt")).main
    assert table.personality is None and len(table.syscalls) == 54
    row = table.syscall("sched_yield")
    assert row is not None
    assert (row.calls, row.errors, row.time_percent, row.total_ms, row.avg_ms) == (112764, None, 20.47, 1030.146, 0.009)
    futex_row = table.syscall("futex")
    assert futex_row is not None and (futex_row.calls, futex_row.errors) == (4437, 546)
    assert table.total is not None
    assert (table.total.calls, table.total.errors, table.total.total_ms, table.total.avg_ms) == (
        130746,
        961,
        5032.679,
        0.038,
    )


def test_recorded_strace_other_workloads_and_modes() -> None:
    cases = {  # file: (rows, futex calls, futex errors, total calls, total errors, total ms)
        "sick_strace_cw.txt": (40, 549, 15, 4574, 377, 4116.516),
        "healthy_strace_fc.txt": (52, None, None, 20330, 925, 1519.251),
        "healthy_strace_cwf.txt": (45, 5161, 565, 19404, 944, 23090.611),
        "gomp_strace_fc.txt": (38, 2873, 8, 4563, 38, 111.112),
        "sleeper_strace_fc.txt": (36, 1, None, 443, 30, 0.0),
    }
    for name, (rows, futex_calls, futex_errors, calls, errors, total_ms) in cases.items():
        table = strace.parse(read(name)).main
        assert len(table.syscalls) == rows, name
        futex_row = table.syscall("futex")
        assert futex_row is not None, name
        if futex_calls is not None:
            assert (futex_row.calls, futex_row.errors) == (futex_calls, futex_errors), name
        assert table.total is not None and (table.total.calls, table.total.errors, table.total.total_ms) == (
            calls,
            errors,
            total_ms,
        ), name
        assert table.syscall("sched_yield") is None, (
            name
        )  # only the sick pool's workers yield (and -c -w sees no worker)
    nanosleep = strace.parse(read("sleeper_strace_fc.txt")).main.syscall("clock_nanosleep")
    assert nanosleep is not None and nanosleep.calls == 200


def test_strace_with_decimal_commas_de_locale() -> None:
    table = strace.parse(read("sick_strace_fc_de.txt")).main
    row = table.syscall("sched_yield")
    assert row is not None and (row.calls, row.time_percent, row.total_ms) == (106868, 29.29, 801.947)
    assert table.total is not None and (table.total.calls, table.total.errors, table.total.total_ms) == (
        120365,
        763,
        2738.178,
    )


def test_public_strace_outputs_older_total_line_and_attach_chatter() -> None:
    old = strace.parse(read("public_strace_issue95_fc.txt")).main  # strace/strace#95, 2019: no usecs/call in total
    assert old.total is not None
    assert (old.total.calls, old.total.errors, old.total.total_ms, old.total.avg_ms) == (32, 3, 0.476, None)
    access = old.syscall("access")
    assert access is not None and (access.calls, access.errors, access.total_ms) == (3, 3, 0.012)
    nomad = strace.parse(read("public_strace_nomad8163_yield.txt"))  # hashicorp/nomad#8163, strace -c -f -p
    assert nomad.attached == (5748,)
    assert [(s.name, s.calls, s.total_ms, s.avg_ms) for s in nomad.main.syscalls] == [
        ("sched_yield", 63593, 2567.622, 0.04)
    ]
    assert nomad.main.total is not None and (nomad.main.total.calls, nomad.main.total.errors) == (63593, None)


def test_recorded_strace_prints_a_table_per_personality() -> None:
    # strace -f -c bash -c './i386; true', where i386 is a static 32-bit program calling sched_yield 3 times
    summary = strace.parse(read("i386_strace_fc.txt"))
    native, i386 = summary.tables
    assert native.personality is None and len(native.syscalls) == 34
    assert native.total is not None and (native.total.calls, native.total.errors) == (208, 28)
    assert i386.personality == "32 bit"
    assert [(row.name, row.calls, row.errors) for row in i386.syscalls] == [
        ("restart_syscall", 1, 1),
        ("sched_yield", 1, None),
    ]
    assert i386.total is not None and (i386.total.calls, i386.total.errors, i386.total.total_ms) == (2, 1, 0.0)


# --- top -------------------------------------------------------------------------------------------------------


def test_seed_gcp_top() -> None:
    report = top.parse(read("gcp_top.txt"))
    assert len(report.snapshots) == 1
    snapshot = report.snapshots[0]
    assert (snapshot.time, snapshot.uptime, snapshot.users, snapshot.load_average) == (
        "11:09:17",
        "3 min",
        1,
        (35.10, 12.57, 4.53),
    )
    assert snapshot.tasks == TaskCounts(total=337, running=15, sleeping=322, stopped=0, zombie=0, d_sleep=None)
    assert snapshot.cpu is not None and (snapshot.cpu.us, snapshot.cpu.sy, snapshot.cpu.id, snapshot.cpu.st) == (
        52.0,
        43.1,
        4.9,
        0.0,
    )
    assert not snapshot.threads_view
    assert len(snapshot.rows) == 16
    assert [row.cpu_percent for row in snapshot.rows[:3]] == [380.5, 307.6, 288.4]
    last = snapshot.rows[-1]
    assert (last.pid, last.user, last.state, last.cpu_percent, last.time, last.command) == (
        1,
        "root",
        "S",
        0.0,
        "0:01.68",
        "systemd",
    )


def test_recorded_top_batch_two_refreshes() -> None:
    report = top.parse(read("sick_top_b.txt"))
    assert len(report.snapshots) == 2
    first, second = report.snapshots
    assert first.load_average == second.load_average == (7.86, 4.29, 1.85)
    assert second.cpu is not None and (second.cpu.us, second.cpu.sy) == (75.2, 24.8)
    assert [(row.pid, row.cpu_percent) for row in second.rows] == [
        (27751, 9.8),
        (27753, 9.8),
        (27752, 8.8),
        (27754, 6.9),
        (27676, 3.9),
    ]
    healthy = top.parse(read("healthy_top_b.txt")).snapshots[0]
    assert (
        healthy.cpu is not None and healthy.cpu.us == 100.0 and healthy.tasks is not None and healthy.tasks.running == 3
    )
    assert (healthy.rows[0].pid, healthy.rows[0].state, healthy.rows[0].cpu_percent) == (29907, "S", 11.8)
    gomp = top.parse(read("gomp_top_b.txt")).snapshots
    assert [(s.rows[0].command, s.rows[0].cpu_percent) for s in gomp] == [("gomp", 86.7), ("gomp", 53.5)]


def test_recorded_top_thread_view() -> None:
    sick = top.parse(read("sick_top_Hb.txt")).snapshots[0]
    assert sick.threads_view and sick.tasks is not None and (sick.tasks.total, sick.tasks.running) == (12, 10)
    assert len(sick.rows) == 12 and {row.command for row in sick.rows} == {"python"}
    gomp = top.parse(read("gomp_top_Hb.txt")).snapshots[0]
    assert gomp.threads_view
    assert [(row.pid, row.cpu_percent, row.time) for row in gomp.rows] == [
        (31057, 40.0, "0:02.04"),
        (31059, 20.0, "0:01.11"),
    ]
    healthy = top.parse(read("healthy_top_Hb.txt")).snapshots[0]
    assert healthy.threads_view and len(healthy.rows) == 8


def test_interactive_top_with_terminal_escapes() -> None:
    text = read("sick_top_interactive_ansi.txt")
    assert "\x1b[" in text
    snapshot = top.parse(text).snapshots[0]
    assert snapshot.load_average == (8.35, 4.45, 1.91)
    assert snapshot.tasks is not None and (snapshot.tasks.total, snapshot.tasks.running, snapshot.tasks.sleeping) == (
        5,
        2,
        3,
    )
    assert snapshot.cpu is not None and snapshot.cpu.us == 100.0
    assert [(row.pid, row.state, row.cpu_percent, row.command) for row in snapshot.rows] == [
        (27752, "R", 20.0, "python"),
        (27751, "R", 13.3, "python"),
        (27753, "S", 13.3, "python"),
        (27754, "S", 6.7, "python"),
        (27676, "S", 0.0, "python"),
    ]


def test_public_top_pastes_of_other_procps_versions() -> None:
    fpm = top.parse(read("public_top_test4_issue11_fpm.txt")).snapshots[0]  # procps-ng 3.3: "KiB Mem:" lines
    assert (fpm.load_average, fpm.cpu.sy if fpm.cpu else None) == ((3.92, 3.93, 3.32), 41.3)
    assert [(row.pid, row.cpu_percent, row.command) for row in fpm.rows[:2]] == [
        (2500, 197.7, "fpm"),
        (3955, 0.7, "top"),
    ]
    old = top.parse(read("public_top_zhangyachen_issue64_procps3.txt")).snapshots[0]  # procps 3: "21.7% us", no st
    assert (old.uptime, old.users) == ("375 days,  2:54", 1)
    assert old.cpu == CpuStates(us=21.7, sy=5.4, ni=2.2, id=69.4, wa=0.0, hi=0.0, si=1.3, st=None)
    assert old.tasks == TaskCounts(total=738, running=1, sleeping=735, stopped=1, zombie=1)
    assert [(row.pid, row.cpu_percent, row.time) for row in old.rows] == [
        (2729, 47.3, "11473:56"),
        (29603, 47.3, "11563:30"),
        (24599, 35.4, "9217:01"),
        (18143, 27.5, "6722:51"),
        (21321, 21.8, "7043:35"),
        (20704, 19.9, "8562:44"),
    ]
    new = top.parse(read("public_top_cinnamon_pr1623_dsleep.txt")).snapshots[0]  # newer procps-ng: sleep, d-sleep
    assert new.tasks == TaskCounts(total=413, running=1, sleeping=309, stopped=0, zombie=103, d_sleep=0)
    assert (new.users, len(new.rows), new.rows[-1].command) == (2, 6, "kworker/R-rcu_gp")


def test_public_top_header_only_with_decimal_commas() -> None:
    (snapshot,) = top.parse(read("public_top_psutil1210_header_only.txt")).snapshots  # giampaolo/psutil#1210
    assert (snapshot.uptime, snapshot.load_average, snapshot.rows) == ("46 days, 20:48", (0.34, 0.19, 0.15), ())
    assert snapshot.cpu is not None and (snapshot.cpu.id, snapshot.cpu.wa) == (99.7, 0.3)


def test_recorded_top_in_a_german_locale() -> None:
    # LC_ALL=de_DE.UTF-8: decimal commas, and top translates "%CPU(s)", "MiB Spch", "ZEIT+" and "BEFEHL"
    first, second = top.parse(read("gomp_top_b_de.txt")).snapshots
    assert first.load_average == (9.0, 9.71, 6.14)
    assert second.cpu == CpuStates(us=89.8, sy=9.8, ni=0.0, id=0.4, wa=0.0, hi=0.0, si=0.0, st=0.0)
    assert second.columns[-2:] == ("ZEIT+", "BEFEHL")
    assert second.rows == (
        TopRow(pid=31879, user="root", state="R", cpu_percent=63.4, mem_percent=0.0, time="0:01.11", command="gomp"),
    )


def test_top_without_a_users_field_and_with_a_screen_cut_short() -> None:
    text = read("gcp_top.txt").replace("up 3 min, 1 user, load", "up 3 min, load")
    text = text.replace(
        "2502 root 20 0 2959472 176016 7612 R 307.6 0.6 3:17.58 python", "2502 root 20 0 2959472 176016 7612 R 307.6"
    )
    snapshot = top.parse(text).snapshots[0]
    assert (snapshot.uptime, snapshot.users, snapshot.load_average) == ("3 min", None, (35.10, 12.57, 4.53))
    assert snapshot.rows[1] == TopRow(
        pid=2502, user="root", state="R", cpu_percent=307.6, mem_percent=None, time=None, command=None
    )


def test_top_of_procps_3_with_percent_signs_and_per_cpu_lines() -> None:
    # The CPU line layouts differ between procps 3 and procps-ng; the values below are the seed's, relaid.
    text = read("gcp_top.txt").replace(
        "%Cpu(s): 52.0 us, 43.1 sy, 0.0 ni, 4.9 id, 0.0 wa, 0.0 hi, 0.0 si, 0.0 st",
        "Cpu(s): 52.0%us, 43.1%sy, 0.0%ni, 4.9%id, 0.0%wa, 0.0%hi, 0.0%si, 0.0%st\n"
        "%Cpu0 : 60.0 us, 40.0 sy, 0.0 ni, 0.0 id, 0.0 wa, 0.0 hi, 0.0 si, 0.0 st",
    )
    snapshot = top.parse(text).snapshots[0]
    assert snapshot.cpu is not None and (snapshot.cpu.us, snapshot.cpu.sy, snapshot.cpu.id) == (52.0, 43.1, 4.9)
    assert [(name, states.sy) for name, states in snapshot.per_cpu] == [("0", 40.0)]


# --- pidstat, mpstat, vmstat -----------------------------------------------------------------------------------


def test_recorded_pidstat_t() -> None:
    report = pidstat.parse(read("sick_pidstat_t.txt"))
    assert report.system is not None and (report.system.kernel, report.system.cpus) == ("6.18.44-fc-v669", 2)
    assert len(report.rows) == 68
    first = report.rows[0]
    assert (
        first.time,
        first.uid,
        first.tgid,
        first.tid,
        first.usr,
        first.system,
        first.wait,
        first.cpu_percent,
        first.cpu,
    ) == (
        "01:15:01",
        0,
        27676,
        None,
        3.0,
        1.0,
        2.0,
        4.0,
        1,
    )
    thread = report.rows[7]
    assert (thread.tid, thread.is_thread, thread.command, thread.wait) == (27758, True, "python", 98.0)
    last = report.averages()[-1]
    assert (last.tid, last.usr, last.system, last.wait, last.cpu_percent, last.cpu) == (
        27766,
        1.66,
        0.66,
        98.67,
        2.33,
        None,
    )
    gomp = pidstat.parse(read("gomp_pidstat_t.txt")).averages()
    assert [(row.tgid, row.tid, row.cpu_percent, row.wait) for row in gomp] == [
        (31057, None, 47.37, 73.03),
        (None, 31057, 22.04, 73.03),
        (None, 31059, 25.66, 73.36),
    ]
    healthy = pidstat.parse(read("healthy_pidstat_t.txt"))
    assert len(healthy.rows) == 52 and healthy.averages()[0].tgid == 29625


def test_recorded_pidstat_12_hour_times_and_switch_tables() -> None:
    report = pidstat.parse(read("sick_pidstat_wut_ampm.txt"))  # LC_ALL=en_US.UTF-8 pidstat -wut
    assert report.system is not None and report.system.date == "12/01/2026"
    assert len(report.rows) == 102
    first = report.rows[0]
    assert (first.time, first.tgid, first.wait, first.cswch_per_s) == ("01:15:04", 27676, 16.83, None)
    switches = [row for row in report.rows if row.cswch_per_s is not None]
    assert (switches[2].tid, switches[2].cswch_per_s, switches[2].nvcswch_per_s, switches[2].usr) == (
        27755,
        42.57,
        45.54,
        None,
    )
    last = report.rows[-1]
    assert (last.average, last.tid, last.cswch_per_s, last.nvcswch_per_s) == (True, 27766, 0.0, 1040.59)


def test_recorded_pidstat_on_one_line() -> None:
    report = pidstat.parse(read("healthy_pidstat_h_uwt.txt"))  # pidstat -h -u -w -t: CPU and switches together
    assert [(r.time, r.tgid, r.tid, r.usr, r.wait, r.cpu, r.cswch_per_s, r.nvcswch_per_s) for r in report.rows] == [
        ("01:28:42", 26628, None, 28.71, 28.71, 0, 188.12, 112.87),
        ("01:28:42", None, 26628, 28.71, 28.71, 0, 188.12, 112.87),
        ("01:28:43", 26628, None, 25.0, 35.0, 1, 162.0, 76.0),
        ("01:28:43", None, 26628, 25.0, 35.0, 1, 162.0, 76.0),
    ]


def test_sysstat_afternoon_times_become_24_hour() -> None:
    text = read("sick_pidstat_wut_ampm.txt").replace("01:15:04 AM", "01:15:04 PM")
    assert pidstat.parse(text).rows[0].time == "13:15:04"


def test_public_pidstat_outputs_older_sysstat_and_chinese_times() -> None:
    chinese = pidstat.parse(read("public_pidstat_sysstat344_ut_zh.txt"))  # sysstat/sysstat#344: 14时05分27秒, no %wait
    assert chinese.system is None and len(chinese.rows) == 7
    process, *threads = chinese.rows
    assert (process.time, process.uid, process.tgid, process.usr, process.system, process.wait) == (
        "14:05:27",
        1010,
        219296,
        100.0,
        16.0,
        None,
    )
    assert [(row.tid, row.cpu_percent, row.cpu) for row in threads] == [
        (219296, 15.0, 1),
        (219298, 31.0, 25),
        (219299, 100.0, 55),
        (219300, 100.0, 16),
        (219301, 100.0, 15),
        (219302, 100.0, 24),
    ]
    v11 = pidstat.parse(read("public_pidstat_sysstat176_v11.txt"))  # sysstat 11.0.1, no -t: PID column
    assert v11.system is not None and (v11.system.kernel, v11.system.cpus) == ("3.16.0-4-amd64", 4)
    assert [row.cpu_percent for row in v11.rows] == [6.0, 7.0, 2.0, 5.0, 7.0, 6.0, 4.95, 10.0, 5.0, 4.0, 5.0]
    assert {(row.pid, row.tgid, row.tid, row.command) for row in v11.rows} == {(23974, None, None, "server")}
    over = pidstat.parse(read("public_pidstat_sysstat149_u.txt")).rows[-1]  # sysstat/sysstat#149: no system line
    assert (over.time, over.pid, over.usr, over.system, over.cpu_percent, over.command) == (
        "10:56:52",
        927,
        554.0,
        68.0,
        102.81,
        "xxx",
    )


def test_recorded_mpstat() -> None:
    report = mpstat.parse(read("sick_mpstat.txt"))
    assert len(report.rows) == 12 and len(report.averages()) == 3
    all_cpus = report.averages()[0]
    assert (all_cpus.cpu, all_cpus.usr, all_cpus.sys, all_cpus.steal, all_cpus.idle) == ("all", 87.42, 12.42, 0.17, 0.0)
    healthy = mpstat.parse(read("healthy_mpstat.txt")).averages()
    assert [(row.cpu, row.usr, row.sys, row.idle) for row in healthy] == [
        ("all", 65.25, 34.42, 0.16),
        ("0", 75.16, 24.51, 0.0),
        ("1", 55.37, 44.3, 0.33),
    ]
    german = mpstat.parse(read("sick_mpstat_de.txt"))  # decimal commas, "Durchschn.:" for Average
    assert german.system is not None and german.system.date == "01.12.2026"
    assert [(row.cpu, row.usr, row.sys) for row in german.averages()] == [
        ("all", 59.56, 40.44),
        ("0", 54.9, 45.1),
        ("1", 64.22, 35.78),
    ]


def test_mpstat_column_names_of_older_sysstat() -> None:
    text = read("sick_mpstat.txt").replace("%usr", "%user").replace("%sys ", "%system ").replace("  %gnice", "")
    text = re.sub(r"( +\d+\.\d\d)( +\d+\.\d\d)$", r"\2", text, flags=re.MULTILINE)  # without the %gnice values
    average = mpstat.parse(text).averages()[0]
    assert (average.cpu, average.usr, average.sys, average.gnice, average.idle) == ("all", 87.42, 12.42, None, 0.0)


def test_public_mpstat_with_12_hour_times() -> None:
    report = mpstat.parse(read("public_mpstat_pcp1922_ampm.txt"))  # performancecopilot/pcp#1922
    assert report.system is not None and report.system.cpus == 4 and report.averages() == ()
    assert [(row.time, row.cpu, row.steal, row.idle) for row in report.rows] == [
        ("10:38:38", "all", 0.01, 99.67),
        ("10:38:38", "0", 0.0, 99.71),
        ("10:38:38", "1", 0.01, 99.64),
        ("10:38:38", "2", 0.01, 99.67),
        ("10:38:38", "3", 0.01, 99.67),
    ]


def test_recorded_vmstat() -> None:
    sick = vmstat.parse(read("sick_vmstat.txt")).rows
    assert [(row.since_boot, row.r, row.cs, row.us, row.sy) for row in sick] == [
        (True, 10, 3832, 40, 7),
        (False, 12, 183110, 80, 20),
        (False, 12, 44133, 81, 19),
        (False, 16, 52449, 78, 22),
        (False, 12, 67111, 74, 26),
    ]
    healthy = vmstat.parse(read("healthy_vmstat.txt")).rows
    assert (len(healthy), healthy[-1].r, healthy[-1].interrupts, healthy[-1].cs, healthy[-1].st, healthy[-1].gu) == (
        5,
        10,
        1450,
        31295,
        0,
        None,
    )
    german = vmstat.parse(read("sick_vmstat_de.txt")).rows  # translated memory column names
    assert [(row.r, row.cs, row.id, row.st) for row in german] == [
        (12, 3763, 53, 0),
        (12, 25541, 0, 0),
        (2, 12549, 9, 2),
    ]
    stamped = vmstat.parse(read("sleeper_vmstat_wt.txt")).rows  # vmstat -w -t: guest column and timestamps
    assert [(row.r, row.gu, row.timestamp) for row in stamped] == [
        (5, 0, "2026-12-01 01:14:43"),
        (3, 0, "2026-12-01 01:14:44"),
        (4, 0, "2026-12-01 01:14:45"),
    ]


# --- the three outcomes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "parser", "message"),
    [
        (
            "error_perf_trace_nonroot.txt",
            perf_trace,
            "No permissions to read /sys/kernel/tracing/events/raw_syscalls/sys_(enter|exit)",
        ),
        ("error_strace_attach.txt", strace, "strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted"),
        ("error_top_notty.txt", top, "top: failed tty get"),
        ("error_mpstat_usage.txt", mpstat, "Usage: mpstat [ options ] [ <interval> [ <count> ] ]"),
        ("error_vmstat_delay.txt", vmstat, "vmstat: delay must be positive integer"),
    ],
)
def test_command_printed_an_error(name: str, parser: object, message: str) -> None:
    text = read(name)
    assert detect_format(text).parse is parser.parse  # type: ignore[attr-defined]
    with pytest.raises(CommandFailed) as failed:
        artifacts.parse(text)
    assert message in failed.value.message and failed.value.line == 1
    assert "\n" not in str(failed.value)


def test_pidstat_of_a_missing_process_is_a_report_without_rows() -> None:
    report = pidstat.parse(read("pidstat_no_such_pid.txt"))
    assert report.rows == () and report.system is not None and report.system.cpus == 2


@pytest.mark.parametrize("parser", PARSERS, ids=lambda parser: parser.FORMAT)
def test_empty_or_foreign_text_is_not_this_format(parser: object) -> None:
    for text in ("", "\n \n", read("README.md")):
        with pytest.raises(NotThisFormat):
            parser.parse(text)  # type: ignore[attr-defined]


def test_each_parser_refuses_the_other_formats() -> None:
    samples = {"perf trace -s": "gcp_perf_trace_s.txt", "strace -c": "sick_strace_fc.txt", "top": "gcp_top.txt",
               "pidstat": "sick_pidstat_t.txt", "mpstat": "sick_mpstat.txt", "vmstat": "sick_vmstat.txt"}  # fmt: skip
    for parser in PARSERS:
        for fmt, name in samples.items():
            if fmt != parser.FORMAT:
                with pytest.raises(NotThisFormat):
                    parser.parse(read(name))


def damaged_lines(report: object) -> list[int]:
    return [item.line for item in report.damage]  # type: ignore[attr-defined]


def test_cut_and_broken_rows_cost_the_row_not_the_report() -> None:
    """A row cut short or garbled is skipped and named (its line); the rest of the report is read."""
    seed = read("gcp_perf_trace_s.txt")
    cut = seed[: seed.index("sched_yield 5119771") + len("sched_yield 5119771 63387.192")]
    summary = perf_trace.parse(cut)
    assert damaged_lines(summary) == [21] and "cut short" in summary.damage[0].what
    assert summary.thread(2847) is not None and summary.thread(2847).syscall("futex") is not None  # type: ignore[union-attr]
    summary = perf_trace.parse(seed.replace("futex 2944 269333.572", "futex 2944 269333.5x2"))
    assert damaged_lines(summary) == [26] and "total" in summary.damage[0].what and len(summary.threads) == 20
    assert summary.thread(2848).syscall("futex") is None and summary.thread(2848).syscall("sched_yield")  # type: ignore[union-attr]
    lines = read("sick_strace_fc.txt").splitlines()
    report = strace.parse("\n".join(lines[:-1]))  # cut after the dashes that precede the total
    assert damaged_lines(report) == [len(lines) - 1] and report.main.total is None and len(report.main.syscalls) > 5
    report = strace.parse(read("sick_strace_fc.txt").replace("112764", "112k64"))
    assert damaged_lines(report) == [4] and "calls" in report.damage[0].what
    assert all(row.name != "sched_yield" for row in report.main.syscalls) and report.main.total is not None
    screen = top.parse(read("gcp_top.txt").replace("380.5", "3-80.5"))
    assert (
        damaged_lines(screen) == [7]
        and len(screen.snapshots[-1].rows) == len(top.parse(read("gcp_top.txt")).snapshots[-1].rows) - 1
    )
    report = vmstat.parse(read("sick_vmstat.txt") + "12  0      0 17117596\n")
    assert damaged_lines(report) == [8] and len(report.rows) == 5
    with pytest.raises(Malformed) as broken:  # a header broken is the whole table's: nothing can be read under it
        vmstat.parse(read("sick_vmstat.txt").replace("wa st\n", "wa\n", 1))
    assert broken.value.line == 2 and "17 columns" in broken.value.reason
    cut_row = pidstat.parse(
        read("sick_pidstat_t.txt").replace(
            "01:15:01        0     27751         -    7.00", "01:15:01        0     27751"
        )
    )
    assert (
        damaged_lines(cut_row) == [9] and len(cut_row.rows) == len(pidstat.parse(read("sick_pidstat_t.txt")).rows) - 1
    )
    facts = read_environment([FIXTURES / "sick_pidstat_t.txt"])
    assert not any("damaged lines" in note for note in facts.notes)


def test_the_damage_is_named_in_the_report(tmp_path: Path) -> None:
    seed = read("gcp_perf_trace_s.txt")
    cut = tmp_path / "cut.txt"
    cut.write_text(seed[: seed.index("sched_yield 5119771") + len("sched_yield 5119771 63387.192")])
    (note,) = [note for note in read_environment([cut]).notes if "damaged lines" in note]
    assert note.startswith("cut.txt: damaged lines: line 21: the last row cut short")


def test_several_summaries_in_one_file_are_each_read(tmp_path: Path) -> None:
    seed, other = read("gcp_perf_trace_s.txt"), read("sick_perf_trace_s.txt")
    twice = perf_trace.parse(seed + "\n" + seed)  # one run's summary appended twice: its threads, counts doubled
    once = perf_trace.parse(seed)
    assert twice.summaries == 2 and len(twice.threads) == len(once.threads)
    assert twice.thread(2847).syscall("sched_yield").calls == 2 * once.thread(2847).syscall("sched_yield").calls  # type: ignore[union-attr]
    two = perf_trace.parse(seed + "\n" + other)  # two runs: the threads of both
    assert len(two.threads) == len(once.threads) + len(perf_trace.parse(other).threads)
    saved = tmp_path / "twice.txt"
    saved.write_text(seed + "\n" + seed)
    facts = read_environment([saved])
    assert (
        facts.workloads[0].sched_yield_calls
        == 2 * read_environment([FIXTURES / "gcp_perf_trace_s.txt"]).workloads[0].sched_yield_calls
    )  # type: ignore[operator]
    assert any("2 summaries in one file, each read and merged" in note for note in facts.notes)


def test_headers_without_rows_are_malformed_where_the_tool_always_prints_rows() -> None:
    for parser, name, keep in ((mpstat, "sick_mpstat.txt", 3), (vmstat, "sick_vmstat.txt", 2)):
        with pytest.raises(Malformed) as broken:
            parser.parse("\n".join(read(name).splitlines()[:keep]))
        assert broken.value.line == keep and "cut short" in broken.value.reason


def test_strace_table_cut_before_its_total_keeps_its_rows() -> None:
    lines = read("sick_strace_fc.txt").splitlines()
    table = strace.parse("\n".join(lines[:10])).main
    assert table.total is None and len(table.syscalls) == 8 and table.syscalls[1].name == "sched_yield"


# --- detection by content --------------------------------------------------------------------------------------

# --- time ------------------------------------------------------------------------------------------------------


def test_public_time_outputs_in_their_shapes() -> None:
    bash = time_output.parse(read("public_time_bash_hyperfine515.txt"))
    assert (bash.shape, bash.real, bash.user, bash.system) == ("bash", 0.284, 0.222, 0.881)
    assert bash.skipped == 2  # the "$ time ..." prompt and the program's "1.0"
    comma = time_output.parse(read("public_time_bash_pytom158_comma.txt"))  # 23m35,438s: a decimal comma
    assert comma.shape == "bash"
    assert comma.real == pytest.approx(23 * 60 + 35.438, abs=1e-9)
    assert comma.user == pytest.approx(12 * 60 + 36.998, abs=1e-9)
    assert comma.system == pytest.approx(11 * 60 + 1.547, abs=1e-9)
    zsh = time_output.parse(read("public_time_zsh_illumos107.txt"))  # the prompt and ls output around it
    assert (zsh.shape, zsh.real, zsh.user, zsh.system) == ("zsh", 0.026, 26.70, 97.16)
    assert zsh.skipped == 2  # "dwyn:~> ls" and ls's "bin  share"
    bsd = time_output.parse(read("public_time_bsd_dotfiles60.txt"))
    assert (bsd.shape, bsd.real, bsd.user, bsd.system) == ("bsd", 6.79, 2.48, 2.29)
    verbose = time_output.parse(read("public_time_v_borg2196.txt"))
    assert (verbose.shape, verbose.user, verbose.system) == ("gnu -v", 0.51, 53.53)
    assert verbose.real == pytest.approx(62.90, abs=1e-9)  # 1:02.90
    assert (verbose.voluntary_switches, verbose.involuntary_switches, verbose.page_faults) == (209830, 4837, 50625)


def test_time_shapes_quoted_wrapped_and_in_units() -> None:
    quoted = time_output.parse("> real\t1m2.500s\r\n> user\t0m0.100s\r\n> sys\t0m3.000s\r\n")
    assert (quoted.real, quoted.user, quoted.system) == (62.5, 0.1, 3.0)
    posix = time_output.parse("real 1.47\nuser 5.72\nsys 0.88\n")  # time -p
    assert (posix.real, posix.user, posix.system) == (1.47, 5.72, 0.88)
    gnu = time_output.parse("0.22user 0.88system 1:00.28elapsed 310%CPU (0avgtext+0avgdata 1234maxresident)k\n")
    assert (gnu.shape, gnu.user, gnu.system) == ("gnu", 0.22, 0.88)
    assert gnu.real == pytest.approx(60.28, abs=1e-9)
    ipython = time_output.parse("CPU times: user 1min 2s, sys: 350 ms, total: 1min 2s\nWall time: 15.5 s\n")
    assert ipython.shape == "ipython" and ipython.real == 15.5
    assert (ipython.user, ipython.system) == (pytest.approx(62.0), pytest.approx(0.35))
    tiny = time_output.parse("CPU times: user 4 ms, sys: 0 ns, total: 4 ms\nWall time: 5.01 ms\n")
    assert (tiny.user, tiny.system, tiny.real) == (pytest.approx(0.004), 0.0, pytest.approx(0.00501))


def test_time_facts_cpus_used_and_system_share() -> None:
    part = time_output.to_facts(time_output.parse(read("public_time_v_borg2196.txt")), "borg.txt")
    assert part.workload is not None
    view = part.workload
    assert (view.user_seconds, view.system_seconds, view.seconds) == (0.51, 53.53, pytest.approx(62.9))
    assert view.cpu_used_cores == pytest.approx((0.51 + 53.53) / 62.9, rel=1e-12)
    assert view.system_share == pytest.approx(53.53 / (0.51 + 53.53), rel=1e-12)
    assert (view.voluntary_switches, view.involuntary_switches, view.page_faults) == (209830, 4837, 50625)
    no_wall = time_output.to_facts(time_output.parse("user 0m1.000s\nsys 0m1.000s\n"), "x.txt")
    assert no_wall.workload is not None and no_wall.workload.cpu_used_cores is None


# --- perf stat -------------------------------------------------------------------------------------------------


def test_public_perf_stat_in_a_german_locale() -> None:
    report = perf_stat.parse(read("public_perf_stat_vim1089_de.txt"))
    assert (report.target, report.runs, report.elapsed) == ("'/bin/dash -c echo foo'", 100, 0.001101122)
    clock, cycles, misses = report.counter("task-clock"), report.counter("cycles"), report.counter("branch-misses")
    assert clock == perf_stat.PerfStatCounter("task-clock", 0.551163, "msec", None)
    assert cycles == perf_stat.PerfStatCounter("cycles", 1190884.0, None, 79.30)  # 1.190.884: dots group thousands
    assert misses == perf_stat.PerfStatCounter("branch-misses", None, None, 25.31)  # <not counted>
    part = perf_stat.to_facts(report, "vim.txt")
    assert part.workload is not None and part.workload.page_faults == 50
    assert part.workload.cpu_used_cores == pytest.approx(0.551163e-3 / 0.001101122, rel=1e-12)  # perf: 0,501


NEW_PERF_STAT = """
 Performance counter stats for 'system wide':

         8 012,34 msec cpu-clock                        #    2,000 CPUs utilized
          183 110      context-switches                 #   22,853 K/sec
                3      cpu-migrations                   #    0,374 /sec

       4,006123456 seconds time elapsed

       1,100000000 seconds user
       2,900000000 seconds sys
"""


def test_perf_stat_new_layout_spaces_for_thousands_and_system_wide() -> None:
    report = perf_stat.parse(NEW_PERF_STAT)
    assert report.counter("cpu-clock") == perf_stat.PerfStatCounter("cpu-clock", 8012.34, "msec", None)
    assert report.counter("context-switches") == perf_stat.PerfStatCounter("context-switches", 183110.0, None, None)
    assert (report.elapsed, report.user, report.system) == (4.006123456, 1.1, 2.9)
    part = perf_stat.to_facts(report, "a.txt")
    assert part.workload is None
    assert part.node.context_switches_per_second == pytest.approx(183110 / 4.006123456, rel=1e-12)
    command = perf_stat.to_facts(perf_stat.parse(NEW_PERF_STAT.replace("'system wide'", "process id '7'")), "p")
    assert command.workload is not None and command.workload.system_share == pytest.approx(2.9 / 4.0, rel=1e-12)


# --- clock source ----------------------------------------------------------------------------------------------


def test_public_kernel_lines_about_the_clock_source() -> None:
    sozu = clocksource.parse(read("public_dmesg_clocksource_sozu500_hpet.txt"))
    assert (sozu.current, sozu.available, sozu.unstable, len(sozu.events)) == ("hpet", None, ("tsc",), 6)
    assert sozu.skipped == 3  # kworker, sched_clock and hrtimer lines
    assert "3 lines not about the clock source were skipped" in clocksource.to_facts(sozu, "s.txt").notes[1]
    assert sozu.events[-1] == "clocksource: Switched to clocksource hpet"  # the [335323.813890] prefix is gone
    propolis = clocksource.parse(read("public_dmesg_clocksource_propolis328_acpi_pm.txt"))
    assert (propolis.current, propolis.unstable) == ("acpi_pm", ("tsc",))
    kernlog = clocksource.parse(read("public_dmesg_clocksource_arpl244_kernlog.txt"))  # "kernel: [  384.258940] "
    assert (kernlog.current, kernlog.unstable, len(kernlog.events)) == (None, ("tsc",), 3)
    early = clocksource.parse(read("public_dmesg_clocksource_madgraph116_tsc_early.txt"))
    assert (early.current, early.unstable) == (None, ("tsc-early",))
    nested = clocksource.parse(read("public_dmesg_clocksource_mkt74_nested.txt"))
    assert (nested.current, nested.unstable, len(nested.events)) == ("hpet", (), 5)


def test_clocksource_files_of_sysfs() -> None:
    assert clocksource.parse("xen\n") == clocksource.ClocksourceReport("xen", None, (), ())
    both = clocksource.parse("hpet\ntsc hpet acpi_pm\n")  # current_clocksource, then available_clocksource
    assert (both.current, both.available) == ("hpet", ("tsc", "hpet", "acpi_pm"))
    part = clocksource.to_facts(both, "cs.txt")
    assert (part.node.clocksource, part.node.available_clocksources, part.workload) == (
        "hpet",
        ("tsc", "hpet", "acpi_pm"),
        None,
    )
    with pytest.raises(NotThisFormat):
        clocksource.parse("tsc is fine\n")


EXPECTED_FORMAT = {
    "_bpftrace_hist_": "latency histograms",
    "_bcc_hist_": "latency histograms",
    "_gdb_threads_": "gdb info threads",
    "_gdb_info_threads_": "gdb info threads",
    "_perf_sched_": "perf sched",
    "_perf_lock_": "perf lock",
    "_pyspy_top_": "py-spy top",
    "_proc_interrupts": "/proc/interrupts",
    "_perf_script_": "perf script",
    "_bcc_": "bcc stacks",
    "_bpftrace_": "bpftrace maps",
    "_pyspy_dump_": "py-spy dump",
    "_proc_softirqs": "/proc/softirqs",
    "_proc_vmstat": "/proc/vmstat",
    "perf_report": "perf report",
    "perf_top": "perf report",
    "_stacks_": "stacks",
    "_folded_": "folded stacks",
    "_proc_status_": "/proc/PID/status",
    "_proc_stat": "/proc/stat",
    "_proc_sched_": "/proc/PID/sched",
    "_pressure_": "pressure",
    "_cgroup_cpu_stat_": "cgroup cpu.stat",
    "_clocksource_": "clock source",
    "perf_trace": "perf trace -s",
    "strace": "strace -c",
    "top": "top",
    "pidstat": "pidstat",
    "mpstat": "mpstat",
    "vmstat": "vmstat",
    "_time_": "time",
    "perf_stat": "perf stat",
    "clocksource": "clock source",
}
PARSED_TYPE = {
    "perf trace -s": PerfTraceSummary,
    "strace -c": StraceSummary,
    "top": TopReport,
    "pidstat": PidstatReport,
    "mpstat": MpstatReport,
    "vmstat": VmstatReport,
    "time": TimeReport,
    "perf stat": PerfStatReport,
    "clock source": ClocksourceReport,
    "perf report": PerfReport,
    "stacks": StackDump,
    "folded stacks": FoldedReport,
    "/proc/PID/status": ProcStatus,
    "/proc/PID/sched": ProcSched,
    "pressure": PressureReport,
    "cgroup cpu.stat": CgroupCpu,
    "perf script": PerfScript,
    "bcc stacks": BccStacks,
    "bpftrace maps": BpftraceMaps,
    "py-spy dump": PySpyDump,
    "/proc/stat": ProcStat,
    "/proc/softirqs": ProcSoftirqs,
    "/proc/vmstat": ProcVmstat,
    "latency histograms": histograms.Histograms,
    "gdb info threads": gdb_threads.GdbThreads,
    "perf sched": perf_sched.SchedReport,
    "perf lock": perf_lock.PerfLock,
    "py-spy top": pyspy_top.PySpyTop,
    "/proc/interrupts": proc_interrupts.ProcInterrupts,
}


def expected_format(name: str) -> str:
    return next(fmt for key, fmt in EXPECTED_FORMAT.items() if key in name)


def fixtures() -> list[Path]:
    return sorted(path for path in FIXTURES.iterdir() if path.suffix == ".txt")


def test_every_fixture_is_recognised_by_content_even_renamed(tmp_path: Path) -> None:
    assert len(fixtures()) == 173
    for index, path in enumerate(fixtures()):
        renamed = tmp_path / f"paste-{index}.log"  # the name says nothing
        renamed.write_bytes(path.read_bytes())
        text = renamed.read_text(encoding="utf-8")
        fmt = detect_format(text)
        assert fmt.name == expected_format(path.name), path.name
        if not path.name.startswith("error_"):
            assert isinstance(artifacts.parse(text), PARSED_TYPE[fmt.name]), path.name


def test_unknown_format_gets_one_line_naming_the_known_formats() -> None:
    for text in ("", "hello\nworld\n", '{"findings": []}\n', read("README.md")):
        with pytest.raises(artifacts.UnknownFormat) as unknown:
            artifacts.parse(text, source="paste.txt")
        message = str(unknown.value)
        assert message == artifacts.unknown_format_message("paste.txt")
        assert "\n" not in message and message.startswith("paste.txt: ")
        for command in ("perf trace -s", "strace -c", "top -b", "pidstat -t", "mpstat -P ALL", "vmstat"):
            assert command in message


# --- what pastes do to text ------------------------------------------------------------------------------------


def collapse(text: str) -> str:
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def test_collapsed_whitespace_parses_the_same() -> None:
    for name in ("sick_perf_trace_s.txt", "sick_strace_fc.txt", "public_strace_issue95_fc.txt", "sick_top_b.txt",
                 "sick_pidstat_wut_ampm.txt", "sick_mpstat_de.txt", "sleeper_vmstat_wt.txt"):  # fmt: skip
        text = read(name)
        assert artifacts.parse(collapse(text)) == artifacts.parse(text), name


def test_wrapped_rows_parse_the_same() -> None:
    text = read("gcp_perf_trace_s.txt")
    wrapped = text.replace("sched_yield 5119771 63387.192 0.002", "sched_yield 5119771 63387.192 0.002\n").replace(
        "futex 3379 269541.688", "futex\n3379 269541.688"
    )
    assert wrapped.count("\n") == text.count("\n") + 2
    assert perf_trace.parse(wrapped) == perf_trace.parse(text)
    strace_text = read("sick_strace_fc.txt")
    wrapped = strace_text.replace(
        " 20.47    1.030146           9    112764", " 20.47    1.030146           9\n    112764"
    )
    assert wrapped != strace_text and strace.parse(wrapped) == strace.parse(strace_text)


def test_shell_prompts_around_a_paste_are_dropped() -> None:
    for name in ("gcp_perf_trace_s.txt", "sick_strace_fc.txt", "gcp_top.txt", "sick_pidstat_t.txt", "sick_mpstat.txt",
                 "sick_vmstat.txt"):  # fmt: skip
        text = read(name)
        pasted = f"[root@gcp-vm ~]# the command that printed {name}\n{text}\n[root@gcp-vm ~]# \n"
        assert artifacts.parse(pasted) == artifacts.parse(text), name


def test_line_ends_byte_order_mark_tabs_and_wide_spaces() -> None:
    text = read("gcp_perf_trace_s.txt")
    pasted = "\ufeff" + text.replace("\n", "\r\n").replace(" ", "\u00a0", 40).replace("futex 2909", "futex\t2909")
    assert perf_trace.parse(pasted) == perf_trace.parse(text)


def test_saved_files_in_utf_16_or_with_stray_bytes(tmp_path: Path) -> None:
    text = read("gcp_top.txt")
    utf16 = tmp_path / "top.txt"
    utf16.write_bytes(text.encode("utf-16"))  # with its byte-order mark, as Windows editors save
    assert artifacts.parse_file(utf16) == top.parse(text)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(text.replace(" systemd", " syst\xe9md").encode("latin-1"))
    report = artifacts.parse_file(latin1)
    assert isinstance(report, TopReport) and report.snapshots[0].rows[-1].command == "syst\ufffdmd"


def test_unreadable_files_say_why_in_one_line(tmp_path: Path) -> None:
    for path, why in ((tmp_path / "missing.txt", "No such file"), (tmp_path, "Is a directory")):
        with pytest.raises(artifacts.Unreadable) as unreadable:
            artifacts.parse_file(path)
        assert str(unreadable.value).startswith(f"{path}: cannot read it") and why in str(unreadable.value)
    big = tmp_path / "big.txt"
    with big.open("wb") as file:
        file.truncate(load.MAX_BYTES + 1)
    with pytest.raises(artifacts.Unreadable, match="larger than 64 MiB"):
        artifacts.parse_file(big)
    unknown = tmp_path / "notes.txt"
    unknown.write_text("the VM is slow\n")
    with pytest.raises(artifacts.UnknownFormat, match=f"^{re.escape(str(unknown))}: not output of a tool"):
        artifacts.parse_file(unknown)


def test_unicode_thread_names_are_kept() -> None:
    text = (
        read("gcp_perf_trace_s.txt")
        .replace("python (2849)", "пайтон 工作 (2849)")
        .replace("ython (2848)", "py (x) (2848)")
    )
    summary = perf_trace.parse(text)
    named = summary.thread(2849)
    odd = summary.thread(2848)
    assert named is not None and named.comm == "пайтон 工作"
    assert odd is not None and odd.comm == "py (x)"


def test_perf_trace_lines_before_the_summary_and_lost_events() -> None:
    text = "LOST 1066 events!\n 0.000 ( 0.003 ms): python/2847 sched_yield() = 0\n" + read("sick_perf_trace_s.txt")
    text = text.replace(" python (11028), 21442 events, 4.7%", "LOST 153 events!\n python (11028), 21442 events, 4.7%")
    summary = perf_trace.parse(text)
    assert summary == PerfTraceSummary(perf("sick_perf_trace_s.txt").threads, True, 2 * (1066 + 153))


HOSTILE_LINES = {  # each made quadratic or worse by a careless pattern (found while writing the parsers)
    "digits in top's CPU line": "top - 1 up 1 min, 1 user, load average: 1.0, 1.0, 1.0\n%Cpu(s): " + "1" * 100_000,
    "spaces in top's CPU line": "top - 1 up 1 min, 1 user, load average: 1.0, 1.0, 1.0\n%Cpu(s): 1" + " " * 100_000,
    "spaces in top's first line": "top - 1 up" + " " * 100_000 + "x, load average: 1\n",
    "digits in top's Tasks line": "Tasks: " + "1" * 100_000,
    "dashes in vmstat's first line": "procs " + "-" * 100_000 + "\n r b\n",
    "digits before time's zsh words": "1" * 100_000 + "s user 1s system 1",
    "digits before GNU time's words": "1" * 100_000 + "user 1system 1",
    "spaces in a perf script frame": "a 1 1.5: cycles:\n1 a" + " (" * 50_000 + "\n",
    "digits in a perf script header": " 1" * 50_000 + ".5: x:\n",
    "brackets in a bcc frame": 'Tracing 1 functions for "f"... Hit Ctrl-C to end.\na' + " [a" * 50_000 + "\n",
    "colons in a bpftrace key": "@[" + ": 1" * 50_000 + "\n",
}


@pytest.mark.parametrize("text", HOSTILE_LINES.values(), ids=HOSTILE_LINES.keys())
def test_a_hostile_line_does_not_hang_the_parser(text: str) -> None:
    def hung(signum: int, frame: object) -> None:
        raise TimeoutError("the parser backtracks without end on one line")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)  # linear parsing takes milliseconds; the patterns these lines broke took hours
    try:
        with pytest.raises(ArtifactError):
            artifacts.parse(text)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --- each parser's docstring sample ----------------------------------------------------------------------------


@pytest.mark.parametrize("parser", PARSERS, ids=lambda parser: parser.FORMAT)
def test_docstring_sample_runs(parser: object) -> None:
    result = doctest.testmod(parser, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.attempted >= 2 and result.failed == 0


def test_docstring_samples_are_real_fixture_lines() -> None:
    for parser in PARSERS:
        sample = docstring_sample(parser.__doc__)
        rows = [" ".join(line.split()) for line in sample.splitlines() if line.strip()]
        haystack = {
            " ".join(line.split()) for path in fixtures() for line in path.read_text(encoding="utf-8").splitlines()
        }
        missing = [row for row in rows if row not in haystack]
        assert not missing, (parser.FORMAT, missing)
