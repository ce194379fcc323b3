"""perf script, bcc's stackcount and profile, bpftrace maps and py-spy dump on real output: public pastes and runs
recorded here on workloads of known behaviour (fixtures/artifacts/README.md: tests/workloads/yielder.c makes exactly
CALLS x THREADS sched_yield calls; recording/yield_threads.py runs three Python threads calling os.sched_yield).

Expected values are read off the fixture files; the recorded runs' counts are their workloads' own.
"""

from __future__ import annotations

import pytest

from agent.diagnosis.inputs.artifacts import bcc_stacks, bpftrace_maps, code, perf_script, pyspy_dump
from agent.diagnosis.inputs.artifacts.backtrace import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def facts(module: object, name: str) -> Part:
    part = module.to_facts(module.parse(read(name)), name)  # type: ignore[attr-defined]
    assert isinstance(part, Part)
    return part


# --- perf script -----------------------------------------------------------------------------------------------


def test_recorded_yield_tracepoint_counts_every_call_per_thread_and_its_caller() -> None:
    """yielder - 100 2 0 under perf record -e syscalls:sys_enter_sched_yield --call-graph dwarf: 2 x 100 calls."""
    script = perf_script.parse(read("recorded_perf_script_yield_tracepoint.txt"))
    assert len(script.samples) == 200 and script.skipped == 0
    assert {sample.event for sample in script.samples} == {"syscalls:sys_enter_sched_yield"}
    first = script.samples[0]
    assert (first.comm, first.tid, first.pid) == ("yielder", 15709, None)
    assert [(frame.function, frame.library) for frame in first.frames] == [
        ("syscall", "libc.so.6"),
        ("spin", "yielder"),
        ("start_thread", "libc.so.6"),
        ("clone3", "libc.so.6"),
    ]
    part = perf_script.to_facts(script, "tp.txt")
    workload = part.workload
    assert workload is not None and part.untimed_counts
    assert workload.sched_yield_calls == 200
    assert sorted((view.tid, view.sched_yield_calls) for view in workload.thread_views or ()) == [
        (15708, 100),
        (15709, 100),
    ]
    assert workload.yield_sites == (code_share("yielder", "spin", 200),)
    assert workload.cpu_samples is None  # a tracepoint's events are calls, not CPU samples


def code_share(library: str, function: str | None, count: float) -> object:
    from agent.diagnosis.facts import CodeShare

    return CodeShare(library, function, "user", count)


def test_recorded_samples_with_call_chains_and_inlined_frames() -> None:
    """perf record -F 25 --call-graph dwarf of the three Python yielders for 2 s: 73 samples of 3 threads."""
    script = perf_script.parse(read("recorded_perf_script_yield_callchain.txt"))
    assert len(script.samples) == 73 and len({sample.tid for sample in script.samples}) == 3
    yielding = [sample for sample in script.samples if any(f.function == "__GI_sched_yield" for f in sample.frames)]
    assert len(yielding) == 19
    # `__GI_sched_yield+0x7 (inlined)` has no frame at its address: its library is unknown, not "inlined"
    assert {f.library for s in yielding for f in s.frames if f.function == "__GI_sched_yield"} == {code.UNKNOWN}
    workload = perf_script.to_facts(script, "cc.txt").workload
    assert workload is not None and workload.cpu_samples_total == 73
    inclusive = {row.function: row.inclusive for row in workload.cpu_samples or () if row.inclusive}
    assert inclusive["__GI_sched_yield"] == 19  # every sample with the yield in its user stack
    assert workload.yield_sites is not None and workload.yield_sites[0].library == "python3.11"


def test_recorded_samples_without_call_chains_are_one_frame_each() -> None:
    script = perf_script.parse(read("recorded_perf_script_yield.txt"))
    assert len(script.samples) == 73 and all(len(sample.frames) == 1 for sample in script.samples)
    assert script.samples[0].frames[0] == Frame("do_syscall_64", code.KERNEL)


def test_public_perf_script_pastes() -> None:
    node = perf_script.parse(read("public_perf_script_cpuprofilify2_node_start_cut.txt"))
    assert len(node.samples) == 10 and node.skipped == 2  # the prompt line, the frame cut after "(/usr/"
    assert [f.function for f in node.samples[5].frames] == ["page_fault", "_start"]
    ci = perf_script.parse(read("public_perf_script_node50079_ci_prefix_cut.txt"))
    assert [len(sample.frames) for sample in ci.samples] == [2, 1, 1, 1, 1, 0]  # the `10:35:40` prefix removed
    assert ci.skipped == 7  # frames of a sample whose header is above the paste
    scylla = perf_script.parse(read("public_perf_script_scylla1909_no_backtrace_cut.txt"))
    assert len(scylla.samples) == 13 and sum(1 for sample in scylla.samples if sample.frames) == 1
    scylla_facts = perf_script.to_facts(scylla, "s.txt").workload
    assert scylla_facts is not None and scylla_facts.cpu_samples_total == 13  # frameless samples still count
    cxx = perf_script.parse(read("public_perf_script_scylla12181_cxx_cut.txt"))
    assert [(s.comm, s.tid, s.frames[0].function) for s in cxx.samples] == [
        ("reactor-1", 765336, "__softirqentry_text_start"),
        ("kworker/4:6-eve", 764154, "collect_percpu_times"),
        ("scylla", 765329, "skb_page_frag_refill"),
    ]
    ptrace = perf_script.parse(read("public_perf_script_pyspy390_ptrace_tracepoint.txt"))
    assert ptrace.samples[0].detail == ("request: 0x00000011, pid: 0x00004fef, addr: 0x00000000, data: 0x00000000")
    part = perf_script.to_facts(ptrace, "p.txt")
    assert part.workload is not None and part.workload.cpu_samples is None and part.workload.thread_views is None
    assert any("syscalls:sys_enter_ptrace" in note and "not read" in note for note in part.notes)


def test_raw_syscalls_entries_count_by_their_number() -> None:
    text = (
        "python 4242/4243 [001] 100.000001: raw_syscalls:sys_enter: NR 24 (0, 0, 0, 0, 0, 0)\n"
        "python 4242/4243 [001] 100.000002: raw_syscalls:sys_enter: NR 24 (0, 0, 0, 0, 0, 0)\n"
        "python 4242/4244 [000] 100.000003: raw_syscalls:sys_enter: NR 202 (7f00, 80, 2, 0, 0, 0)\n"
    )
    workload = perf_script.to_facts(perf_script.parse(text), "raw.txt").workload
    assert workload is not None and workload.sched_yield_calls == 2
    views = {(view.tid, view.pid): (view.sched_yield_calls, view.futex_calls) for view in workload.thread_views or ()}
    assert views == {(4243, 4242): (2, None), (4244, 4242): (None, 1)}


# --- bcc ---------------------------------------------------------------------------------------------------------


def test_recorded_stackcount_counts_the_yielders_calls_exactly() -> None:
    """stackcount-bpfcc -P -U t:syscalls:sys_enter_sched_yield while yielder - 5000 2 8 ran: 10,000 calls."""
    report = bcc_stacks.parse(read("recorded_bcc_stackcount_yield_tracepoint.txt"))
    assert (report.tool, report.probe) == ("stackcount", "t:syscalls:sys_enter_sched_yield")
    (stack,) = report.stacks
    assert (stack.comm, stack.pid, stack.count) == ("yielder", 15777, 10_000)  # `b'yielder'` as bcc printed it
    part = bcc_stacks.to_facts(report, "sc.txt")
    assert part.workload is not None and part.workload.yield_sites == (code_share(code.UNKNOWN, None, 10_000),)
    assert any("yielder 10000" in note for note in part.notes)


def test_recorded_profile_of_python_yielders() -> None:
    report = bcc_stacks.parse(read("recorded_bcc_profile_python_yielders.txt"))
    assert report.tool == "profile" and len(report.stacks) == 169
    assert sum(stack.count for stack in report.stacks) == 467 and {stack.comm for stack in report.stacks} == {"python3"}
    yielding = report.stacks[4]
    modes = [(frame.function, frame.library == code.KERNEL) for frame in yielding.frames[:6]]
    assert modes[4] == ("entry_SYSCALL_64_after_hwframe", True) and modes[5] == ("__GI___sched_yield", False)
    workload = bcc_stacks.to_facts(report, "p.txt").workload
    assert workload is not None and workload.cpu_samples_total == 467
    inclusive = {row.function: row.inclusive for row in workload.cpu_samples or () if row.inclusive}
    assert inclusive["__GI___sched_yield"] == 216 and inclusive["__x64_sys_sched_yield"] == 169


def test_public_bcc_pastes() -> None:
    rfc = bcc_stacks.parse(read("public_bcc_profile_bcc617_addresses_idle.txt"))
    assert [(stack.comm, stack.pid, stack.count) for stack in rfc.stacks] == [
        ("dd", 6773, 1),
        ("func_ab", 16829, 1),
        ("swapper/2", 0, 57),
        ("swapper/3", 0, 57),
    ]
    dd = rfc.stacks[0].frames
    assert dd[0] == Frame("read_iter_zero", code.KERNEL) and dd[-1] == Frame("read", code.UNKNOWN)  # after `--`
    bold = bcc_stacks.parse(read("public_bcc_stackcount_bcc3614_bold_count.txt"))
    assert bold.probe == "ocfs2_file_read_iter" and bold.stacks[0].count == 524_286
    assert bold.stacks[0].frames[0].function == "ocfs2_file_read_iter"  # the command line above is not a frame
    cut = bcc_stacks.parse(read("public_bcc_stackcount_bcc1613_verbose_cut.txt"))
    assert (len(cut.stacks), cut.stacks[0].comm, cut.stacks[0].count, cut.cut) == (1, "dd", 79, 9)
    assert cut.stacks[0].frames[-1] == Frame(None, code.UNKNOWN)  # 7fc532d28890 [unknown]: a user address
    early = bcc_stacks.parse(read("public_bcc_stackcount_bcc730_pid_first.txt"))
    assert (early.stacks[0].comm, early.stacks[0].frames[0].function) == ("bash", "strlen")


# --- bpftrace ----------------------------------------------------------------------------------------------------


def test_recorded_bpftrace_maps_of_the_yielder() -> None:
    """yielder - 1000 2 8 and - 1000 2 0: each thread's 1,000 yields, by stack and by command."""
    stacks = bpftrace_maps.parse(read("recorded_bpftrace_ustack_kstack_yielder.txt"))
    assert stacks.probes == ("tracepoint:syscalls:sys_enter_sched_yield",)
    assert [entry.count for entry in stacks.entries] == [1000, 1000]
    user, kernel = stacks.entries[0].stacks
    assert user == (Frame(None, code.UNKNOWN),) and kernel[-1] == Frame("entry_SYSCALL_64_after_hwframe", code.KERNEL)
    assert stacks.skipped == 3  # the prompt line with the command, bpftrace's RLIMIT message, "Attaching 2 probes..."
    by_comm = bpftrace_maps.parse(read("recorded_bpftrace_comm_yields.txt"))
    assert [(entry.scalars, entry.count) for entry in by_comm.entries] == [(("yielder",), 2000)]
    part = bpftrace_maps.to_facts(by_comm, "comm.txt")
    assert part.workload is None and any("yielder 2000" in note for note in part.notes)


def test_recorded_bpftrace_profile_reads_perf_frames_and_stacks_without_a_kernel_part() -> None:
    report = bpftrace_maps.parse(read("recorded_bpftrace_profile_python_yielders.txt"))
    assert report.probes == ("profile:hz:99",) and len(report.entries) == 99
    assert sum(entry.count for entry in report.entries) == 296
    yielding = [e for e in report.entries if any(f.function == "sched_yield" for s in e.stacks for f in s)]
    assert (len(yielding), sum(entry.count for entry in yielding)) == (32, 211)
    workload = bpftrace_maps.to_facts(report, "p.txt").workload
    assert workload is not None and workload.cpu_samples_total == 296
    assert {row.function: row.inclusive for row in workload.cpu_samples or () if row.inclusive}["sched_yield"] == 211


def test_public_bpftrace_map_by_pid_and_comm() -> None:
    report = bpftrace_maps.parse(read("public_bpftrace_heidsoft140_pid_comm_syscalls.txt"))
    assert report.probes == ("tracepoint:raw_syscalls:sys_enter",) and len(report.entries) == 16
    assert report.entries[0].scalars == ("594", "wpa_supplicant") and report.entries[-1].count == 6


# --- py-spy dump -------------------------------------------------------------------------------------------------


def test_recorded_dumps_of_the_python_yielders() -> None:
    plain = pyspy_dump.parse(read("recorded_pyspy_dump_yielders.txt"))
    assert [(t.ident, t.name, t.state) for t in plain.threads] == [
        ("15844", "MainThread", "idle"),
        ("15846", "Thread-1 (spin)", "running"),
        ("15847", "Thread-2 (spin)", "running"),
        ("15848", "Thread-3 (spin)", "running"),
    ]
    workload = pyspy_dump.to_facts(plain, "d.txt").workload
    assert workload is not None and workload.cpu_samples == (code_share("yield_threads.py", "spin", 3),)
    native = pyspy_dump.parse(read("recorded_pyspy_dump_native_yielders.txt"))
    assert [t.state for t in native.threads] == ["sleep", "yield", "futex", "yield"]  # one waits for the GIL
    workload = pyspy_dump.to_facts(native, "n.txt").workload
    assert workload is not None
    assert workload.yield_sites == (code_share("yield_threads.py", "spin", 2),)
    assert workload.futex_sites == (code_share("yield_threads.py", "spin", 1),)


def test_public_dumps_idle_cut_and_with_prose_around() -> None:
    hang = pyspy_dump.parse(read("public_pyspy_dump_gprofiler612_hang_cut.txt"))
    assert [t.state for t in hang.threads] == ["futex", "futex", "io", "futex", "futex", "idle"]
    assert hang.cut == 1 and hang.threads[-1].frames == ()  # "    wait" without its place: cut short
    workload = pyspy_dump.to_facts(hang, "h.txt").workload
    assert workload is not None and workload.futex_sites is not None
    assert [(s.library, s.function, s.count) for s in workload.futex_sites] == [
        ("thread.py", "_worker", 2),
        ("main.py", "_snapshot", 1),
        ("system_metrics.py", "_continuously_poll_memory", 1),
    ]
    usage = pyspy_dump.parse(read("public_pyspy_dump_ha38120_usage_above_cut.txt"))
    assert len(usage.threads) == 2 and usage.skipped == 17  # the usage text, prompts, the Process/Python lines
    uwsgi = pyspy_dump.parse(read("public_pyspy_dump_pyspy221_uwsgi_no_frames.txt"))
    assert [(t.name, t.state, t.frames) for t in uwsgi.threads] == [("uWSGIWorker1Core0", "idle", ())]


# --- what pastes do to the new formats ---------------------------------------------------------------------------

ESSENTIALS = {  # what each format's records say, without the count of lines read past
    "recorded_perf_script_yield_tracepoint.txt": (perf_script, lambda r: r.samples),
    "public_perf_script_cpuprofilify2_node_start_cut.txt": (perf_script, lambda r: r.samples),
    "recorded_bcc_profile_python_yielders.txt": (bcc_stacks, lambda r: r.stacks),
    "public_bcc_profile_bcc617_addresses_idle.txt": (bcc_stacks, lambda r: r.stacks),
    "recorded_bpftrace_profile_python_yielders.txt": (bpftrace_maps, lambda r: r.entries),
    "public_bpftrace_heidsoft140_pid_comm_syscalls.txt": (bpftrace_maps, lambda r: r.entries),
    "recorded_pyspy_dump_native_yielders.txt": (pyspy_dump, lambda r: r.threads),
    "public_pyspy_dump_ha40292_idle_cut.txt": (pyspy_dump, lambda r: r.threads),
}


def quoted(text: str) -> str:
    return "".join(f"> {line}\n" for line in text.splitlines())


def damaged(text: str) -> dict[str, str]:
    middle = len(text.splitlines()) // 2
    rows = text.splitlines()
    return {
        "quote prefixes": quoted(text),
        "Windows line ends": text.replace("\n", "\r\n"),
        "prompts around": f"[root@host ~]# the command\n{text}\n[root@host ~]# \n",
        "an elision": "\n".join([*rows[:middle], "[...]", *rows[middle:]]) + "\n",
    }


@pytest.mark.parametrize("name", sorted(ESSENTIALS))
def test_quotes_line_ends_prompts_and_elisions_read_the_same(name: str) -> None:
    module, essential = ESSENTIALS[name]
    original = essential(module.parse(read(name)))  # type: ignore[attr-defined]
    for damage, text in damaged(read(name)).items():
        assert essential(module.parse(text)) == original, (name, damage)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(ESSENTIALS))
def test_a_last_line_cut_in_half_loses_at_most_that_item(name: str) -> None:
    module, essential = ESSENTIALS[name]
    text = read(name).rstrip("\n")
    cut = text[: len(text) - max(1, len(text.splitlines()[-1]) // 2)]
    original, after = essential(module.parse(text)), essential(module.parse(cut))  # type: ignore[attr-defined]
    assert len(original) - 1 <= len(after) <= len(original) and after[:-1] == original[: len(after) - 1]


def test_a_redacted_path_keeps_the_library_name() -> None:
    text = read("recorded_perf_script_yield_tracepoint.txt").replace("(/tmp/rec2/yielder)", "([...]/yielder)")
    workload = perf_script.to_facts(perf_script.parse(text), "r.txt").workload
    assert workload is not None and workload.yield_sites == (code_share("yielder", "spin", 200),)


def test_each_new_parser_refuses_the_others_fixtures() -> None:
    samples = {
        perf_script: "recorded_perf_script_yield_callchain.txt",
        bcc_stacks: "recorded_bcc_profile_python_yielders.txt",
        bpftrace_maps: "recorded_bpftrace_profile_python_yielders.txt",
        pyspy_dump: "recorded_pyspy_dump_native_yielders.txt",
    }
    for parser in samples:
        for other, name in samples.items():
            assert parser.looks_like(read(name)) == (other is parser), (parser.FORMAT, name)
