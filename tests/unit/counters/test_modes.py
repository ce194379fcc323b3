"""Mode selection (--mode), the BPF-less sources' parsing and bookkeeping, on real files and real kernel output."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from agent.collectors import modes
from agent.counters import cgroup_tree, perf_events, perf_syscalls
from agent.counters.exit_records import ExitRecord, parse_message
from agent.counters.schedstat import TaskSchedstat, parse_schedstat
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.facts import MachineFacts
from tests.unit.config.test_config import run_cli
from tests.unit.locations import UNIT_FIXTURES

CAPS = {"CAP_BPF": True, "CAP_PERFMON": True, "CAP_SYS_ADMIN": True, "CAP_SYS_RESOURCE": False}


def test_exit_record_of_a_thread_as_the_kernel_sent_it() -> None:
    record = parse_message((UNIT_FIXTURES / "taskstats-exit-thread.bin").read_bytes())
    assert record == ExitRecord(tid=19479, tgid=19438, run_ns=50_016_399, wait_ns=335_310)


def test_a_message_without_a_thread_record_is_not_one() -> None:
    message = (UNIT_FIXTURES / "taskstats-exit-thread.bin").read_bytes()
    assert parse_message(message[:20]) is None


def test_futex_filters_list_every_flag_combination() -> None:
    assert perf_events.equality_filter("op", (0, 128)) == "op == 0 || op == 128"
    assert perf_events.inequality_filter("op", (1, 129)) == "op != 1 && op != 129"
    wait = perf_syscalls._commands(perf_syscalls.FUTEX_COMMANDS["wait"])
    assert set(wait) == {c | f for c in (0, 9, 11) for f in (0, 128, 256, 384)}


def test_cgroup_parent_paths() -> None:
    assert cgroup_tree.parent_path("/a/b") == "/a"
    assert cgroup_tree.parent_path("/a") == "/"
    assert cgroup_tree.parent_path("/") is None


def test_perf_cgroup_counting_is_taken_as_hierarchical_from_4_11() -> None:
    assert cgroup_tree.perf_counts_hierarchically("6.18.44-fc-v657")
    assert cgroup_tree.perf_counts_hierarchically("4.11.0")
    assert not cgroup_tree.perf_counts_hierarchically("3.10.0-1160.el7.x86_64")


def test_which_hierarchy_each_source_walks() -> None:
    hybrid = CgroupLayout(unified=Path("/sys/fs/cgroup/unified"), v1={"cpu": Path("/sys/fs/cgroup/cpu")})
    centos7 = CgroupLayout(
        unified=None,
        v1={"perf_event": Path("/sys/fs/cgroup/perf_event"), "name=systemd": Path("/sys/fs/cgroup/systemd")},
    )
    assert cgroup_tree.perf_event_tree(hybrid) == Path("/sys/fs/cgroup/unified")
    assert cgroup_tree.perf_event_tree(centos7) == Path("/sys/fs/cgroup/perf_event")
    assert cgroup_tree.task_tree(hybrid) == (Path("/sys/fs/cgroup/unified"), "cgroup.threads")
    assert cgroup_tree.task_tree(centos7) == (Path("/sys/fs/cgroup/systemd"), "tasks")


def facts(**changes: object) -> MachineFacts:
    base = MachineFacts(
        release="6.18.44",
        is_root=True,
        capabilities=dict(CAPS),
        btf=True,
        tracefs=UNIT_FIXTURES / "tracefs-6.18",
        headers=None,
        headers_error="no kernel headers for 6.18.44",
        cgroups=CgroupLayout(unified=Path("/sys/fs/cgroup/unified")),
        cgroup_root=Path("/sys/fs/cgroup/unified"),
        bpf_stats=False,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_auto_takes_perf_when_bpf_cannot_run_and_says_why() -> None:
    chosen = modes.choose("auto", facts(capabilities=CAPS | {"CAP_BPF": False, "CAP_SYS_ADMIN": False}))
    assert chosen.mode == "perf"
    assert chosen.reason.startswith("BPF cannot run: missing CAP_BPF")
    assert "run as root, or add BPF" in chosen.fix
    assert any("futex wait time" in missing for missing in chosen.missing)


def test_auto_takes_procfs_when_perf_events_are_refused_too() -> None:
    refused = facts(bpf_refused="EPERM (Operation not permitted)", perf_refused="EACCES (Permission denied)")
    chosen = modes.choose("auto", refused)
    assert chosen.mode == "procfs"
    assert "perf counters cannot either: the kernel refused perf_event_open(): EACCES" in chosen.reason
    assert any("sched_yield and futex counts" in missing for missing in chosen.missing)


def test_auto_falls_back_when_bpf_passed_the_checks_but_failed_to_load() -> None:
    chosen = modes.choose("auto", facts(), bpf_error="no kernel headers for 6.18.44")
    assert chosen.mode == "perf"
    assert chosen.reason == "BPF cannot run: the BPF programs failed to load: no kernel headers for 6.18.44"


def test_a_forced_mode_is_taken_as_asked() -> None:
    chosen = modes.choose("procfs", facts(bpf_refused="EPERM (Operation not permitted)"))
    assert (chosen.mode, chosen.reason) == ("procfs", "asked for with --mode")
    assert chosen.fix.startswith("for bpf mode: ")
    files = ["cgroup_cpu", "cgroup_memory", "pressure"]
    assert [factory.name for factory in modes.factories("procfs")] == ["sched", *files]
    assert [factory.name for factory in modes.factories("perf")] == ["syscalls", "sched", *files]


@pytest.mark.parametrize(
    ("args", "env"), [(["--mode", "ebpf"], {}), ([], {"SCHEDWATCH_MODE": "fast"})], ids=["flag", "variable"]
)
def test_a_bad_mode_is_one_line(args: list[str], env: dict[str, str]) -> None:
    import os

    result = run_cli("run", *args, env={**os.environ, **env})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "auto, bpf, perf, procfs" in lines[0] or "'auto', 'bpf', 'perf', 'procfs'" in lines[0], lines[0]


def test_schedstat_lines() -> None:
    assert parse_schedstat("137079 2935337 2\n") == (137079, 2935337)
    assert parse_schedstat("garbage") is None


def write_thread(proc: Path, tid: int, run_ns: int, wait_ns: int) -> None:
    (proc / str(tid)).mkdir(exist_ok=True)
    (proc / str(tid) / "schedstat").write_text(f"{run_ns} {wait_ns} 7\n")


def test_schedstat_totals_grow_by_what_threads_add_and_count_new_threads_whole(tmp_path: Path) -> None:
    tree, proc = tmp_path / "cgroup", tmp_path / "proc"
    (tree / "app").mkdir(parents=True)
    proc.mkdir()
    (tree / "cgroup.threads").write_text("")
    (tree / "cgroup.procs").write_text("")  # what marks a cgroup tree as visible
    (tree / "app" / "cgroup.threads").write_text("10\n")
    write_thread(proc, 10, 5_000, 900)  # there before the agent: counted from its first scan
    source = TaskSchedstat(tree, "cgroup.threads", None, 100, proc)
    app = (tree / "app").stat().st_ino

    assert source.read().cgroups[app] == ("/app", [0, 0])
    write_thread(proc, 10, 6_000, 1_000)
    (tree / "app" / "cgroup.threads").write_text("10\n11\n")
    write_thread(proc, 11, 300, 40)  # born since: counted whole
    assert source.read().cgroups[app] == ("/app", [1_000 + 300, 100 + 40])

    (tree / "app" / "cgroup.threads").write_text("11\n")  # 10 exits with no exit record
    snapshot = source.read()
    assert snapshot.cgroups[app][1] == [1_300, 140], "counters never go backwards"
    assert snapshot.exits_unrecorded == 0, "an exit record may still be on its way"
    assert source.read().exits_unrecorded == 1


def test_a_removed_cgroup_is_reported_under_its_last_path_then_forgotten(tmp_path: Path) -> None:
    tree, proc = tmp_path / "cgroup", tmp_path / "proc"
    (tree / "job").mkdir(parents=True)
    proc.mkdir()
    (tree / "cgroup.procs").write_text("")
    (tree / "cgroup.threads").write_text("")
    (tree / "job" / "cgroup.threads").write_text("")
    source = TaskSchedstat(tree, "cgroup.threads", None, 100, proc)
    job = (tree / "job").stat().st_ino
    source.read()
    write_thread(proc, 20, 700, 70)
    (tree / "job" / "cgroup.threads").write_text("20\n")
    assert source.read().cgroups[job] == ("/job", [700, 70])
    (tree / "job" / "cgroup.threads").unlink()
    (tree / "job").rmdir()  # its thread exited with it, no exit record
    assert source.read().cgroups[job] == ("/job", [700, 70])
    assert source.read().cgroups[job] == ("/job", [700, 70]), "reported once more after its thread is given up"
    assert job not in source.read().cgroups


def test_schedstat_reads_at_most_max_cgroups_and_a_removed_one_frees_its_place(tmp_path: Path) -> None:
    tree, proc = tmp_path / "cgroup", tmp_path / "proc"
    proc.mkdir()
    tree.mkdir()
    (tree / "cgroup.procs").write_text("")
    (tree / "cgroup.threads").write_text("")
    for tid, name in enumerate(("a", "b", "c"), start=30):
        (tree / name).mkdir()
        (tree / name / "cgroup.threads").write_text(f"{tid}\n")
    (tree / "empty").mkdir()
    (tree / "empty" / "cgroup.threads").write_text("")
    source = TaskSchedstat(tree, "cgroup.threads", None, 2, proc)
    ids = {name: (tree / name).stat().st_ino for name in ("a", "b", "c")}
    source.read()  # the first scan gives two of the three their places
    for tid in (30, 31, 32):
        write_thread(proc, tid, 1_000, 100)
    read = source.read().cgroups
    counted = [name for name, cgroup_id in ids.items() if cgroup_id in read]
    assert len(counted) == 2 and all(read[ids[name]] == (f"/{name}", [1_000, 100]) for name in counted), read
    (left_out,) = set(ids) - set(counted)
    (tree / counted[0] / "cgroup.threads").unlink()
    (tree / counted[0]).rmdir()
    write_thread(proc, 30 + "abc".index(left_out), 1_500, 150)  # seen first now: counted whole
    assert source.read().cgroups[ids[left_out]] == (f"/{left_out}", [1_500, 150])


def test_live_diagnosis_reads_a_perf_mode_agent_without_inventing_zeros() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from agent import metrics
    from agent.diagnosis.facts import Workload
    from agent.series.reading import read_families

    labels = 'container_id="",container="",pod="",namespace="",cgroup="/job"'
    text = "\n".join(
        [
            'schedwatch_build_info{version="0.1.0",kernel_release="6.18.44"} 1',
            'schedwatch_mode{mode="perf"} 1',
            'schedwatch_source_up{source="syscalls"} 1',
            'schedwatch_source_up{source="sched"} 1',
            f"schedwatch_sched_yield_calls_total{{{labels}}} 5000",
            f"schedwatch_runqueue_wait_seconds_total{{{labels}}} 2.5",
            "",
        ]
    )
    reading = read_families(text_string_to_metric_families(text), at=0.0)
    job = Workload("", "", "", "", "/job")
    assert reading.count(job, metrics.SCHED_YIELD_CALLS) == 5000
    assert reading.count(job, metrics.RUNQUEUE_WAIT_SECONDS) == 2.5
    assert reading.count(job, metrics.FUTEX_WAIT_SECONDS) is None, "perf mode cannot time futex waits: unknown, not 0"
    assert reading.count(job, metrics.OFFCPU_SECONDS, "preempted") is None
