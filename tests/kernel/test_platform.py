"""What must hold on every kernel and cgroup layout of the platform tier (tests/platforms): every BPF program loads
(a program the verifier refuses fails here with the verifier's words), a memory limit hit for real is counted as
the kernel counts it, and `diagnose` names a throttled pool and its CPU limit. Layout-neutral: cgroup2 alone, v1
alone, or both (this host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent.diagnosis.rules.thresholds import Thresholds
from agent.machine.cgroups.files import parse_flat_keyed
from tests.kernel.test_cgroup_cpu import PERIOD_US, QUOTA_US, quota_cgroup, throttling
from tests.kernel.test_diagnosis_facts import numpy126  # noqa: F401 (a fixture)
from tests.support.agent import AgentProcess
from tests.support.diagnose import Diagnose
from tests.support.scrape import cgroup_value
from tests.support.workloads import SOURCES, CgroupSandbox, build

# Each BPF collector's programs that run whatever the kernel and flags (the others depend on tracepoints a kernel
# may lack, e.g. futex_waitv before 5.16).
PROGRAMS = {
    "syscalls": {"sys_enter_sched_yield", "sys_enter_futex", "sys_exit_futex", "sched_process_exit"},
    "sched": {"sched_switch", "sched_wakeup", "sched_wakeup_new", "sched_process_exit"},
    "syscall_families": {"sys_enter", "sys_exit", "sched_process_exit"},
    "oncpu": {"on_cpu_sample"},
}
MIB = 1 << 20


def loader_output(log: str) -> str:
    """What the agent's log says of programs that did not load: the loader's lines (bcc's compiler and the
    verifier write plain text beside the agent's JSON lines) and the agent's own about collectors it lacks."""
    kept = []
    for line in log.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            kept.append(line)
            continue
        if isinstance(event, dict) and any(word in json.dumps(event) for word in ("cannot load", "BPF", "degraded")):
            kept.append(line)
    return "\n".join(kept[-80:])


def test_every_bpf_program_is_loaded(agent: AgentProcess) -> None:
    scrape = agent.scrape()
    loaded = {
        collector: {
            dict(labels)["program"] for labels in scrape.find("schedwatch_bpf_program_runs_total", collector=collector)
        }
        for collector in PROGRAMS
    }
    missing = {collector: sorted(PROGRAMS[collector] - loaded[collector]) for collector in PROGRAMS}
    missing = {collector: programs for collector, programs in missing.items() if programs}
    release = os.uname().release
    assert not missing, f"{release}: programs not loaded {missing}; the agent's log says:\n{loader_output(agent.log())}"


def memory_limited(cgroups: CgroupSandbox, name: str, limit: int) -> tuple[str, str, Path]:
    """A cgroup whose memory limit is *limit* bytes, where this layout keeps it (memory.max in cgroup2, or
    memory.limit_in_bytes in the v1 memory hierarchy at the same path): the workload's argument, the agent's label,
    and the directory holding the limit."""
    group = cgroups.make(name)
    label = cgroups.relative(group)
    if "memory" not in cgroups.v1:
        (group.parent / "cgroup.subtree_control").write_text("+memory")
        (group / "memory.max").write_text(str(limit))
        return str(group), label, group
    memory = cgroups.make_v1("memory", label)
    (memory / "memory.limit_in_bytes").write_text(str(limit))
    return f"{group}:{memory}", label, memory


def limit_hits(directory: Path) -> tuple[int, int]:
    """The kernel's counts of the limit being hit and of OOM kills there: memory.events' max and oom_kill
    (cgroup2), or memory.failcnt and memory.oom_control's oom_kill (v1)."""
    events = directory / "memory.events"
    if events.exists():
        counted = parse_flat_keyed(events.read_text())
        return counted["max"], counted["oom_kill"]
    control = parse_flat_keyed((directory / "memory.oom_control").read_text())
    return int((directory / "memory.failcnt").read_text()), control["oom_kill"]


def test_a_memory_limit_hit_for_real_is_counted_as_the_kernel_counts_it(
    agent: AgentProcess, cgroups: CgroupSandbox
) -> None:
    """A program that writes every page of 64 MiB under a limit of 32 MiB (no swap: nothing of it can be reclaimed)
    hits the limit until the kernel's OOM killer stops it, in its own cgroup; the agent exports the limit as set and
    exactly the kernel's counts of hits (memory.events max, or failcnt) and kills."""
    dirs, label, limited = memory_limited(cgroups, "memory-limit", 32 * MIB)
    done = subprocess.run(
        [str(build("alloc_churn")), dirs, "60", "1", str(64 * MIB), "1"], capture_output=True, timeout=600
    )
    assert done.returncode == -9, f"alloc_churn exited {done.returncode}, not killed: {done.stderr!r}"
    hits, killed = limit_hits(limited)
    assert hits > 0 and killed == 1, (hits, killed)
    scrape = agent.scrape()
    assert cgroup_value(scrape, "schedwatch_memory_limit_bytes", label) == 32 * MIB
    assert cgroup_value(scrape, "schedwatch_memory_events_total", label, event="max") == hits
    assert cgroup_value(scrape, "schedwatch_memory_events_total", label, event="oom_kill") == killed


def test_diagnose_names_a_throttled_pool_and_its_cpu_limit(
    agent: AgentProcess,
    cgroups: CgroupSandbox,
    numpy126: Path,  # noqa: F811 (the fixture imported above)
) -> None:
    """A numpy 1.26 pool of 4 workers (OpenBLAS 0.3.23: its idle threads yield) under a limit of a tenth of a CPU,
    diagnosed from the running agent: its oversubscription is named with the limit as the CPUs it may use, and the
    throttling the kernel counted (cpu.stat) is named too."""
    group, cpu, dirs = quota_cgroup(cgroups, "throttled-pool")
    limit = QUOTA_US / PERIOD_US
    cgroup = cgroups.relative(group)
    window = 10
    enter = "".join(f"echo $$ > {directory}/cgroup.procs && " for directory in dirs.split(":")) + 'exec "$@"'
    # The pool's work starts inside the window, not its start-up: numpy's import and the workers' fork under a
    # tenth of a CPU take minutes on an emulated machine (the v1 VM's window ended before the pool did any work).
    pool = subprocess.Popen(
        ["sh", "-c", enter, "sh", sys.executable, str(SOURCES / "blas_pool.py"), "4", str(window - 3), "--on-go"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(numpy126)},
    )
    assert pool.stdin is not None and pool.stdout is not None
    try:
        assert "ready" in json.loads(pool.stdout.readline())
        diagnose = Diagnose("--duration", str(window), "--cgroup", cgroup, "--from", f"http://127.0.0.1:{agent.port}")
        diagnose.wait_for_window()
        pool.stdin.write(b"go\n")
        pool.stdin.flush()
        assert json.loads(pool.stdout.readline())["numpy"] == "1.26.4"
        report = diagnose.result()
        periods, throttled, _seconds = throttling(cpu)
    finally:
        pool.stdin.close()
        pool.wait(timeout=120)
    # The kernel's own count decides whether throttling must be named: 8 busy BLAS threads stopped by a tenth of a
    # CPU are throttled in most periods unless the machine gave the whole pool less than that.
    assert throttled >= Thresholds().throttled_share * periods, (
        f"cpu.stat: {throttled} of {periods} periods throttled: the pool got less than {limit} CPU from this machine"
    )
    findings = {finding["cause"]: finding for finding in report["findings"] if finding["workload"]["cgroup"] == cgroup}
    assert {"thread-pool-oversubscription", "cpu-throttling"} <= set(findings), json.dumps(report, default=str)
    pool_evidence = {item["fact"]: item for item in findings["thread-pool-oversubscription"]["evidence"]}
    assert pool_evidence["threads in processes with a pool library"]["compared_with"] == f"CPUs it may use: {limit}"
