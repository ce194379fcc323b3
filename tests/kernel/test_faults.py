"""Faults, each produced for real: the agent keeps serving, says what is wrong in one line, and loses nothing.

Every fault here is made with the real thing: capabilities dropped, a seccomp filter denying bpf(2), mount
namespaces hiding tracefs or the kernel headers, a full or read-only state directory, cgroups and processes
vanishing while the agent reads them, bounded maps overfilled, SIGKILL, dead runtime sockets, the wall clock
set an hour away. docs/reliability.md lists what each test tried, how much, and what was lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.identity.labels import label_value
from tests.support.agent import REPO, AgentProcess, require_root
from tests.support.invariants import assert_counters_monotonic, complaints
from tests.support.prometheus import Prometheus
from tests.support.scrape import Scrape, missed_switches
from tests.support.sidecar import PREFIX as SIDECAR_PREFIX
from tests.support.sidecar import Sidecar
from tests.support.workloads import CgroupSandbox, Workload, build

YIELDS = "schedwatch_sched_yield_calls_total"
GRACE = 3.0
BPF_COLLECTORS = ("syscalls", "sched")


def start(
    tmp_path: Path,
    *flags: str,
    name: str = "agent",
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
    port: int | None = None,
) -> AgentProcess:
    """An agent with its own state directory and log under *tmp_path*, serving."""
    work = tmp_path / name
    work.mkdir(exist_ok=True)
    state = ("--state-dir", str(work / "state")) if "--state-dir" not in flags else ()
    mode = ("--mode", "bpf") if "--mode" not in flags else ()  # these faults are BPF mode's; auto would fall back
    agent = AgentProcess(
        work / "agent.log", "--series-grace", str(GRACE), *state, *mode, *flags, env=env, prefix=prefix, port=port
    )
    agent.wait_ready()
    return agent


def check(
    *flags: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`schedwatch check` under the same fault."""
    command = [*prefix, sys.executable, "-m", "agent", "check", *flags]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env, timeout=120)


def clean_env() -> dict[str, str]:
    """This environment without BCC_KERNEL_SOURCE, so that the agent looks for headers itself."""
    return {k: v for k, v in os.environ.items() if k != "BCC_KERNEL_SOURCE"}


def in_mount_namespace(script: str) -> tuple[str, ...]:
    """A prefix running the command in a private mount namespace after *script* (sh) prepared it."""
    return ("unshare", "-m", "sh", "-ec", f'{script}\nexec "$@"', "sh")


def log_lines(agent: AgentProcess, event: str) -> list[dict[str, object]]:
    """The agent's JSON log records of *event*."""
    records = []
    for line in agent.log().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and record.get("event") == event:
                records.append(record)
    return records


def assert_degraded_to_cgroup_cpu(agent: AgentProcess, cgroups: CgroupSandbox, reason: str) -> None:
    """BPF collectors down with *reason* logged once each, cgroup_cpu exact, and a clean stop."""
    try:
        group = cgroups.make("degraded")
        holder = subprocess.Popen(["sh", "-c", f"echo $$ > {group}/cgroup.procs && exec sleep 60"])
        try:
            deadline = time.monotonic() + 5
            while (group / "cgroup.procs").read_text().strip() != str(holder.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            scrape = agent.scrape()
            assert scrape.value("schedwatch_threads", cgroup=cgroups.relative(group)) == 1
        finally:
            holder.kill()
            holder.wait()
        assert scrape.value("schedwatch_source_up", source="cgroup_cpu") == 1
        for collector in BPF_COLLECTORS:
            assert scrape.value("schedwatch_source_up", source=collector) == 0
            logged = [
                r
                for r in log_lines(agent, "collector_unavailable") + log_lines(agent, "collector_failed_to_start")
                if r["collector"] == collector
            ]
            assert len(logged) == 1, agent.log()
            assert reason in json.dumps(logged[0]), logged[0]
        assert complaints(agent.log()) == []  # the reasons were logged before it listened, once
    finally:
        assert agent.stop() == 0, agent.log()


# --- BPF refused -------------------------------------------------------------------------------------------------

DROP_BPF_CAPS = ("setpriv", "--bounding-set", "-bpf,-perfmon,-sys_admin", "--inh-caps", "-bpf,-perfmon,-sys_admin")


def seccomp_denying_bpf() -> tuple[str, ...]:
    return (str(build("no_bpf")),)


@pytest.mark.parametrize(
    ("how", "reason", "fix"),
    [
        (
            "capabilities",
            "missing CAP_BPF (create maps, load programs) and CAP_PERFMON",
            "run as root, or add BPF, PERFMON",
        ),
        ("seccomp", "the kernel refused bpf() EPERM (Operation not permitted)", "run with seccompProfile: Unconfined"),
    ],
)
def test_bpf_refused_keeps_cgroup_cpu_serving(
    cgroups: CgroupSandbox, tmp_path: Path, how: str, reason: str, fix: str
) -> None:
    prefix = DROP_BPF_CAPS if how == "capabilities" else seccomp_denying_bpf()
    assert_degraded_to_cgroup_cpu(start(tmp_path, prefix=prefix), cgroups, reason)
    result = check("--state-dir", str(tmp_path / "check"), prefix=prefix)
    assert result.returncode == 1, result.stdout + result.stderr
    for collector in BPF_COLLECTORS:
        line = next(line for line in result.stdout.splitlines() if line.startswith(f"  {collector} "))
        assert "CANNOT RUN" in line and reason in line and f"fix: {fix}" in line, line


def test_a_refused_map_write_leaves_only_missed_wake_ups_uncounted(
    cgroups: CgroupSandbox, sleeper: Path, tmp_path: Path
) -> None:
    # The agent writes map values itself, to start counting missed wake-ups and to choose whose call sites are
    # counted; a profile that refuses BPF_MAP_UPDATE_ELEM (bpf(2) command 2) must cost that count and that choice
    # only (every workload's sites are then counted), each said once, at load.
    agent = start(tmp_path, prefix=(str(build("no_bpf")), "--only", "2"))
    try:
        for event in ("missed_wakeups_not_counted", "call_sites_not_chosen"):
            (refused,) = log_lines(agent, event)
            assert "Operation not permitted" in str(refused["error"]), refused
            assert "BPF_MAP_UPDATE_ELEM" in str(refused["fix"]), refused
        group = cgroups.make("map-write-refused")
        count, sleep_ns = 20, 10_000_000
        workload = Workload(sleeper, group, count, sleep_ns)
        try:
            scrape = agent.scrape()
        finally:
            workload.release()
        for collector in BPF_COLLECTORS:
            assert scrape.value("schedwatch_source_up", source=collector) == 1
        blocked = scrape.value("schedwatch_offcpu_seconds_total", cgroup=cgroups.relative(group), reason="blocked")
        missed = missed_switches(scrape, cgroup=cgroups.relative(group))
        assert blocked is not None and blocked >= (count - missed) * sleep_ns / 1e9 * 0.99, (blocked, missed)
        assert complaints(agent.log()) == []  # the two warnings came before it listened
    finally:
        assert agent.stop() == 0, agent.log()


# --- tracefs absent ----------------------------------------------------------------------------------------------

HIDE_TRACEFS = in_mount_namespace(
    "for d in /sys/kernel/tracing /sys/kernel/debug/tracing /sys/kernel/debug; do\n"
    "  umount -l $d 2>/dev/null || true\n"
    "done\n"
    "test ! -d /sys/kernel/tracing/events && test ! -d /sys/kernel/debug/tracing/events"
)
DROP_SYS_ADMIN = ("setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin")


def test_tracefs_absent_and_not_mountable_degrades_bpf_collectors(cgroups: CgroupSandbox, tmp_path: Path) -> None:
    prefix = (*HIDE_TRACEFS, *DROP_SYS_ADMIN)  # CAP_BPF and CAP_PERFMON kept: only the mount is impossible
    agent = start(tmp_path, prefix=prefix)
    (unmountable,) = log_lines(agent, "tracefs_unavailable")
    assert "Operation not permitted" in str(unmountable["error"])
    assert_degraded_to_cgroup_cpu(agent, cgroups, "tracefs is not mounted")
    result = check("--state-dir", str(tmp_path / "check"), prefix=prefix)
    assert result.returncode == 1
    (tracefs,) = [line for line in result.stdout.splitlines() if line.startswith("  tracefs      ")]
    assert tracefs.startswith("  tracefs      NOT MOUNTED: "), tracefs
    assert "mount -t tracefs tracefs /sys/kernel/tracing" in tracefs
    assert "  cgroup_cpu       ok " in result.stdout, result.stdout


def test_tracefs_absent_is_mounted_by_the_agent(cgroups: CgroupSandbox, yielder: Path, tmp_path: Path) -> None:
    agent = start(tmp_path, prefix=HIDE_TRACEFS)
    try:
        (mounted,) = log_lines(agent, "tracefs_mounted")
        assert mounted["path"] == "/sys/kernel/tracing"
        group = cgroups.make("tracefs")
        Workload(yielder, group, 2_500, 2, hold=False)
        scrape = agent.scrape()
        assert scrape.value(YIELDS, cgroup=cgroups.relative(group)) == 5_000
    finally:
        assert agent.stop() == 0, agent.log()


# --- headers absent ----------------------------------------------------------------------------------------------

HIDE_HEADERS = in_mount_namespace(
    "mount -t tmpfs none /usr/src\nmount -t tmpfs none /lib/modules\n"
    "if [ -e /sys/kernel/kheaders.tar.xz ]; then mount --bind /dev/null /sys/kernel/kheaders.tar.xz; fi"
)


def test_headers_absent_degrade_bpf_collectors_with_the_fix(cgroups: CgroupSandbox, tmp_path: Path) -> None:
    agent = start(tmp_path, prefix=HIDE_HEADERS, env=clean_env())
    assert_degraded_to_cgroup_cpu(agent, cgroups, "no kernel headers for")
    result = check("--state-dir", str(tmp_path / "check"), prefix=HIDE_HEADERS, env=clean_env())
    assert result.returncode == 1
    assert "headers      MISSING: no kernel headers for" in result.stdout
    assert "apt-get install linux-headers-$(uname -r)" in result.stdout


# --- state directory full or read-only ----------------------------------------------------------------------------


def full_tmpfs(directory: Path) -> tuple[str, ...]:
    """A 64 KiB tmpfs at *directory*, filled to its last byte and its last inode."""
    return in_mount_namespace(
        f"mount -t tmpfs -o size=64k,nr_inodes=16 none {directory}\n"
        f"dd if=/dev/zero of={directory}/filler bs=4k 2>/dev/null || true\n"
        f"i=0; while touch {directory}/f$i 2>/dev/null; do i=$((i+1)); done"
    )


def read_only(directory: Path) -> tuple[str, ...]:
    return in_mount_namespace(f"mount --bind {directory} {directory}\nmount -o remount,bind,ro {directory}")


@pytest.mark.parametrize(
    ("kind", "error"), [("full", "No space left on device"), ("read-only", "Read-only file system")]
)
def test_unusable_state_dir_degrades_bpf_collectors_with_the_fix(
    cgroups: CgroupSandbox, tmp_path: Path, kind: str, error: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    prefix = full_tmpfs(state) if kind == "full" else read_only(state)
    agent = start(tmp_path, "--state-dir", str(state), prefix=prefix, env=clean_env())
    assert_degraded_to_cgroup_cpu(agent, cgroups, f"cannot prepare headers in {state}: [Errno")
    assert error in agent.log()
    result = check("--state-dir", str(state), "--no-load", prefix=prefix, env=clean_env())
    assert result.returncode == 1
    assert f"headers      MISSING: cannot prepare headers in {state}" in result.stdout
    assert error in result.stdout and "pass a writable --state-dir" in result.stdout


def test_read_only_state_dir_is_fine_when_headers_are_elsewhere(
    cgroups: CgroupSandbox, yielder: Path, tmp_path: Path
) -> None:
    prepared = tmp_path / "prepared"
    assert check("--state-dir", str(prepared), "--no-load", env=clean_env()).returncode == 0
    (tree,) = (prepared / "kernel-headers").iterdir()
    state = tmp_path / "state"
    state.mkdir()
    env = dict(clean_env(), BCC_KERNEL_SOURCE=str(tree))
    agent = start(tmp_path, "--state-dir", str(state), prefix=read_only(state), env=env)
    try:
        group = cgroups.make("ro-state")
        Workload(yielder, group, 4_000, 1, hold=False)
        scrape = agent.scrape()
        assert scrape.value(YIELDS, cgroup=cgroups.relative(group)) == 4_000
        assert all(scrape.value("schedwatch_source_up", source=c) == 1 for c in BPF_COLLECTORS)
    finally:
        assert agent.stop() == 0, agent.log()


# --- cgroups removed and /proc entries vanishing during scrapes --------------------------------------------------


class Scraper:
    """Scrapes an agent back to back in a thread and keeps every scrape; any failure is kept too."""

    def __init__(self, agent: AgentProcess) -> None:
        self.agent = agent
        self.scrapes: list[Scrape] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.scrapes.append(self.agent.scrape())  # urlopen raises on any status but 2xx
            except Exception as error:  # every failure is a finding
                self.failures.append(repr(error))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def hostile_comm_process() -> subprocess.Popen[bytes]:
    """A live process that names itself b'\\xff"tenant' (not UTF-8, a quote) and yields, so that it has a series."""
    code = (
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.prctl(15, ctypes.c_char_p(b'\\xff\"tenant'), 0, 0, 0)\n"  # PR_SET_NAME
        "for _ in range(100): os.sched_yield()\n"
        "print(flush=True); sys.stdin.read()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.readline()
    return process


def scrapes_of(scraper: Scraper, name: str, **labels: str) -> int:
    """In how many of the scraper's scrapes a sample of *name* with *labels* appears."""
    return sum(1 for scrape in scraper.scrapes if scrape.find(name, **labels))


CHURN_SECONDS = 3.0
CHURN_YIELDS = 2_000
MIN_SCRAPES = 5
MIN_CGROUPS = 10


@pytest.mark.parametrize("keyed_by", ["cgroup", "process"])
def test_churn_of_cgroups_and_processes_during_scrapes_loses_nothing(
    cgroups: CgroupSandbox, yielder: Path, tmp_path: Path, keyed_by: str
) -> None:
    agent = start(tmp_path, "--workloads-by", keyed_by, "--process-top-k", "1000")
    try:
        # cgroup="(removed)" appears with the first cgroup removed before a scrape saw it, maybe only during the churn.
        first = agent.scrape()
        before = first.value(YIELDS, cgroup="(removed)") or 0.0
        tenant = hostile_comm_process()
        scraper = Scraper(agent)
        made: list[str] = []
        forks = 0
        started = time.monotonic()
        try:
            # At least CHURN_SECONDS, MIN_SCRAPES scrapes and MIN_CGROUPS cgroups (the machine is shared).
            while time.monotonic() - started < CHURN_SECONDS or (
                (len(scraper.scrapes) < MIN_SCRAPES or len(made) < MIN_CGROUPS)
                and time.monotonic() - started < 5 * CHURN_SECONDS
            ):
                # Every other name is one a tenant could choose to break the exposition: not UTF-8, a quote.
                group = cgroups.make("churn" if len(made) % 2 else 'churn-\udcff"')
                made.append(label_value(cgroups.relative(group)))
                Workload(yielder, group, CHURN_YIELDS // 2, 2, hold=False)  # yields, exits at once
                # Processes living a few ms, so that the agent's /proc reads race their exit.
                subprocess.run(  # the path as an argument: a quote in it is the point, not shell syntax
                    ["sh", "-c", 'echo $$ > "$1/cgroup.procs"; for i in 1 2 3 4 5; do /bin/true; done', "sh", group],
                    check=True,
                )
                forks += 6
                cgroups.remove(group)
            time.sleep(1.0)  # scrapes after the last removal
        finally:
            scraper.stop()
            tenant.kill()
            tenant.wait()
        assert not scraper.failures, scraper.failures[:5]
        scraper.scrapes.append(agent.scrape())  # one that began after every churned process had exited
        # The process that named itself with a byte that is not UTF-8 and a quote has its series, shown safely.
        assert scrapes_of(
            scraper, "schedwatch_process_sched_yield_calls_total", pid=str(tenant.pid), comm='\\xff"tenant'
        )
        scrapes = scraper.scrapes
        assert len(scrapes) >= MIN_SCRAPES, f"only {len(scrapes)} scrapes in {time.monotonic() - started:.1f}s"
        assert assert_counters_monotonic(scrapes) > 1000
        last_seen: dict[str, float] = {}
        for scrape in scrapes:
            for path in made:
                value = scrape.value(YIELDS, cgroup=path)
                if value is not None:
                    last_seen[path] = value
        unseen = len(made) - len(last_seen)
        after = scrapes[-1].value(YIELDS, cgroup="(removed)")
        if keyed_by == "cgroup":
            # A cgroup seen in any scrape ends with exactly what it yielded; one removed before any scrape saw it is
            # counted in cgroup="(removed)" (which other processes on the machine may add to as well).
            assert all(value == CHURN_YIELDS for value in last_seen.values()), {
                k: v for k, v in last_seen.items() if v != CHURN_YIELDS
            }
            if unseen:
                assert after is not None and after - before >= unseen * CHURN_YIELDS, (before, after, unseen)
        else:
            # Keyed by process, a process is placed where it ran even when it was gone before the agent could read
            # its /proc entry (by the kernel's announcements of its parent and of its move into the cgroup), and
            # its series outlives the removed cgroup: every cgroup ends with exactly what it yielded.
            assert unseen == 0, sorted(set(made) - set(last_seen))
            assert all(value == CHURN_YIELDS for value in last_seen.values()), {
                k: v for k, v in last_seen.items() if v != CHURN_YIELDS
            }
        assert len(made) >= MIN_CGROUPS
        assert complaints(agent.log()) == []
        print(f"{keyed_by}: {len(made)} cgroups, {forks} short processes, {len(scrapes)} scrapes, {unseen} unseen")
    finally:
        assert agent.stop() == 0, agent.log()


# --- bounded maps full --------------------------------------------------------------------------------------------


def sidecar_agent(tmp_path: Path, *flags: str) -> Sidecar:
    """An agent in a pid namespace of its own (--sidecar): it counts only what runs in there, so that nothing
    else on the machine takes a slot of its tiny maps."""
    return Sidecar(start(tmp_path, "--sidecar", *flags, prefix=SIDECAR_PREFIX))


def map_entries(pid: int, name: str) -> int:
    """Entries of the BPF map called *name* that process *pid* holds, counted by bpftool."""
    for map_id in held_bpf_ids(pid)["map"]:
        shown = json.loads(
            subprocess.run(["bpftool", "-j", "map", "show", "id", str(map_id)], capture_output=True).stdout
        )
        if shown.get("name") == name:
            dumped = subprocess.run(
                ["bpftool", "-j", "map", "dump", "id", str(map_id)], capture_output=True, check=True
            )
            return len(json.loads(dumped.stdout))
    raise AssertionError(f"process {pid} holds no map named {name}")


# Futex calls a 1-thread yielder makes besides its yields (pthread_create and pthread_join): each lost
# process's events are its 1,000 yields and these.
THREAD_LIBRARY_FUTEXES = 10


def drops(scrape: Scrape, collector: str, name: str) -> float:
    value = scrape.value("schedwatch_bpf_events_dropped_total", collector=collector, map=name)
    assert value is not None, f"no drop counter for {collector}/{name}"
    return value


def test_full_cgroup_map_counts_drops_keeps_exact_counts_and_recovers(
    cgroups: CgroupSandbox, yielder: Path, tmp_path: Path
) -> None:
    capacity = 3
    sidecar = sidecar_agent(tmp_path, "--max-cgroups", str(capacity), "--no-collector.sched")
    agent = sidecar.agent
    try:
        groups = [cgroups.make(f"full{index}") for index in range(capacity + 2)]
        first = agent.scrape()
        for group in groups:
            sidecar.run(yielder, group, 1_000, 1)
        after = agent.scrape()
        assert map_entries(sidecar.pid, "cgroups") == capacity
        counted = {g: after.value(YIELDS, cgroup=cgroups.relative(g)) for g in groups}
        fitted = [g for g, v in counted.items() if v is not None]
        # The agent's own cgroup holds a slot too; the workloads that fitted are exact, the rest dropped, counted.
        assert 1 <= len(fitted) < len(groups), counted
        assert all(counted[g] == 1_000 for g in fitted), counted
        lost = len(groups) - len(fitted)
        dropped = drops(after, "syscalls", "cgroups") - drops(first, "syscalls", "cgroups")
        assert lost * 1_000 <= dropped <= lost * (1_000 + THREAD_LIBRARY_FUTEXES), dropped
        # Recovery: once the cgroups are gone and read one last time, their slots are free for new workloads.
        for group in groups:
            cgroups.remove(group)
        agent.scrape()
        assert map_entries(sidecar.pid, "cgroups") <= capacity - len(fitted)
        fresh = [cgroups.make("fresh") for _ in fitted]
        for group in fresh:
            sidecar.run(yielder, group, 1_500, 2)
        recovered = agent.scrape()
        assert [recovered.value(YIELDS, cgroup=cgroups.relative(g)) for g in fresh] == [3_000] * len(fresh)
        print(f"cgroups map of {capacity}: {len(fitted)} fitted exactly, {lost} x 1000 yields lost, {dropped} drops")
    finally:
        assert sidecar.stop() == 0, agent.log()


def test_full_process_map_counts_drops_keeps_exact_counts_and_recovers(
    cgroups: CgroupSandbox, yielder: Path, tmp_path: Path
) -> None:
    sidecar = sidecar_agent(tmp_path, "--process-top-k", "2", "--max-processes", "2", "--no-collector.sched")
    agent = sidecar.agent
    holders: list[subprocess.Popen[str]] = []
    try:
        group = cgroups.make("procs")
        first = agent.scrape()
        # Four live processes that yielded 1,000 times each, against a map of two (the agent itself holds one).
        holders = [sidecar.hold(yielder, group, 1_000, 1)[0] for _ in range(4)]
        scrape = agent.scrape()
        per_process = scrape.find("schedwatch_process_sched_yield_calls_total", comm="yielder")
        assert 1 <= len(per_process) < 4 and set(per_process.values()) == {1_000}, per_process
        dropped = drops(scrape, "syscalls", "processes") - drops(first, "syscalls", "processes")
        lost = 4 - len(per_process)
        assert lost * 1_000 <= dropped <= lost * (1_000 + THREAD_LIBRARY_FUTEXES), dropped
        print(f"processes map of 2: {len(per_process)} fitted exactly, {lost} lost, {dropped} drops")
        # The per-workload total is kept in another map: every yield is there.
        assert scrape.value(YIELDS, cgroup=cgroups.relative(group)) == 4_000
        for holder in holders:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(10)
        holders.clear()
        # Recovery: the exited processes' entries are deleted, a new process is counted exactly.
        holder, truth = sidecar.hold(yielder, group, 700, 3)
        holders.append(holder)
        recovered = agent.scrape()
        assert recovered.value("schedwatch_process_sched_yield_calls_total", pid=str(truth["pid"])) == 2_100
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
        assert sidecar.stop() == 0, agent.log()


def test_full_thread_maps_count_drops_keep_call_counts_exact_and_recover(
    cgroups: CgroupSandbox, spinner: Path, futexer: Path, tmp_path: Path
) -> None:
    sidecar = sidecar_agent(tmp_path, "--max-threads", "8")
    agent = sidecar.agent
    waits, wait_ns = 4, 20_000_000
    parked: subprocess.Popen[str] | None = None
    try:
        # 16 threads parked in futex waits hold every slot of both per-thread maps.
        parked, _ = sidecar.hold(spinner, cgroups.make("parked"), 16, 0.01, -1)
        first = agent.scrape()
        crowded = cgroups.make("crowded")
        truth = sidecar.run(futexer, crowded, waits, wait_ns, 3)
        scrape = agent.scrape()
        path = cgroups.relative(crowded)
        # Per-workload counts do not need a thread slot: exact. The wait times and off-CPU time do: dropped, counted.
        assert scrape.value("schedwatch_futex_calls_total", cgroup=path, op="wait") == truth["wait"]
        assert scrape.value("schedwatch_futex_calls_total", cgroup=path, op="wake") == truth["wake"]
        assert drops(scrape, "syscalls", "futex_start") - drops(first, "syscalls", "futex_start") >= waits
        assert drops(scrape, "sched", "threads") > drops(first, "sched", "threads")
        print(
            "thread maps of 8:",
            drops(scrape, "syscalls", "futex_start") - drops(first, "syscalls", "futex_start"),
            "futex_start drops,",
            drops(scrape, "sched", "threads") - drops(first, "sched", "threads"),
            "sched thread drops",
        )
        # Recovery: the parked threads exit, their slots free up, the same work is timed again.
        assert parked.stdin is not None
        parked.stdin.close()
        parked.wait(10)
        roomy = cgroups.make("roomy")
        truth = sidecar.run(futexer, roomy, waits, wait_ns, 3)
        recovered = agent.scrape()
        path = cgroups.relative(roomy)
        assert recovered.value("schedwatch_futex_wait_duration_seconds_count", cgroup=path) == waits
        waited = recovered.value("schedwatch_futex_wait_seconds_total", cgroup=path)
        # Each wait timed out after wait_ns, and the kernel saw no more than the workload measured around its calls.
        assert waited is not None and waits * wait_ns / 1e9 <= waited <= int(str(truth["waited_ns"])) / 1e9
        blocked = recovered.value("schedwatch_offcpu_seconds_total", cgroup=path, reason="blocked")
        # A switch the kernel did not deliver (this VM's pid 1 threads raise no events) loses one off-CPU period.
        missed = missed_switches(recovered, cgroup=path, container_id="")
        assert missed <= 1, f"the kernel did not deliver {missed} switches: too many to judge"
        assert blocked is not None and blocked >= (waits - missed) * wait_ns / 1e9, (blocked, missed)
    finally:
        if parked is not None and parked.poll() is None:
            parked.kill()
            parked.wait()
        assert sidecar.stop() == 0, agent.log()


# --- SIGKILL, then a restart ---------------------------------------------------------------------------------------


def bpf_object_ids(kind: str) -> set[int]:
    """Ids of every BPF program, map or link on the machine, from bpftool."""
    bpftool = shutil.which("bpftool")
    assert bpftool, "bpftool is missing: apt-get install bpftool"
    shown = subprocess.run([bpftool, "-j", kind, "show"], capture_output=True, text=True, check=True)
    return {int(entry["id"]) for entry in json.loads(shown.stdout or "[]")}


def held_bpf_ids(pid: int) -> dict[str, set[int]]:
    """The programs, maps and links a process holds open, from its fdinfo."""
    held: dict[str, set[int]] = {"prog": set(), "map": set(), "link": set()}
    for fdinfo in Path(f"/proc/{pid}/fdinfo").iterdir():
        with contextlib.suppress(OSError):
            for line in fdinfo.read_text().splitlines():
                for kind in held:
                    if line.startswith(f"{kind}_id:"):
                        held[kind].add(int(line.split()[1]))
    return held


def still_loaded(held: dict[str, set[int]]) -> dict[str, set[int]]:
    """Those of the *held* programs, maps and links that are still loaded in the kernel."""
    loaded = {kind: ids & bpf_object_ids(kind) for kind, ids in held.items()}
    return {kind: ids for kind, ids in loaded.items() if ids}


def test_sigkill_leaves_nothing_behind_and_prometheus_handles_the_reset(
    cgroups: CgroupSandbox, yielder: Path, tmp_path: Path
) -> None:
    first = start(tmp_path, name="first")
    prometheus = Prometheus(tmp_path, [f"127.0.0.1:{first.port}"])
    second: AgentProcess | None = None
    try:
        held = held_bpf_ids(first.process.pid)
        assert len(held["prog"]) >= 4 and len(held["map"]) >= 6, held
        group = cgroups.make("restart")
        path = cgroups.relative(group)
        series = f'{YIELDS}{{cgroup="{path}"}}'
        Workload(yielder, group, 1, 1, hold=False)  # Prometheus sees the series before the yields to count
        wait_for_samples(prometheus, series, at_least=2, value=1)
        Workload(yielder, group, 1_500, 2, hold=False)
        wait_for_samples(prometheus, series, at_least=2, value=3_001)

        first.process.send_signal(signal.SIGKILL)
        assert first.stop() == -signal.SIGKILL
        # The kernel frees them once the last file descriptor is gone, some of it in deferred work (and a
        # `bpftool map show` elsewhere on the machine holds each map open for a moment): wait a little.
        deadline = time.monotonic() + 10
        while left := still_loaded(held):
            assert time.monotonic() < deadline, f"the killed agent's BPF objects are still loaded: {left}"
            time.sleep(0.1)

        second = start(tmp_path, name="second", port=first.port)
        Workload(yielder, group, 1_000, 2, hold=False)
        assert second.scrape().value(YIELDS, cgroup=path) == 2_000  # the new agent counts from zero
        wait_for_samples(prometheus, series, at_least=2, value=2_000)
        # Over exactly the span of the samples (no extrapolation), Prometheus sees one reset and every yield.
        samples = prometheus.query(f"{series}[5m]")[0]["values"]
        start_ms, end_ms = round(float(samples[0][0]) * 1000), round(float(samples[-1][0]) * 1000)
        window = f"[{end_ms - start_ms}ms]"
        at = f"{end_ms / 1000:.3f}"
        assert float(prometheus.api("query", query=f"resets({series}{window})", time=at)["result"][0]["value"][1]) == 1
        increase = float(prometheus.api("query", query=f"increase({series}{window})", time=at)["result"][0]["value"][1])
        assert increase == 5_000, samples
    finally:
        prometheus.stop()
        if second is not None:
            assert second.stop() == 0, second.log()
        first.stop()


def wait_for_samples(prometheus: Prometheus, series: str, at_least: int, value: float, timeout: float = 30) -> None:
    """Until Prometheus holds *at_least* samples of *value* as the series' latest ones."""
    deadline = time.monotonic() + timeout
    while True:
        result = prometheus.query(f"{series}[1m]")
        latest = [float(v) for _, v in result[0]["values"]] if result else []
        if len(latest) >= at_least and latest[-at_least:] == [value] * at_least:
            return
        assert time.monotonic() < deadline, f"{series}: {latest}"
        time.sleep(0.5)


# --- runtime sockets dead ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def dead_sockets(directory: Path) -> Iterator[tuple[Path, Path]]:
    """A socket file nobody listens on, and one whose listener accepts then closes at once."""
    refused = directory / "refused.sock"
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(refused))  # the file stays after close: connect() is refused
    closer = directory / "closer.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(closer))
    listener.listen(64)
    accepted = [0]

    def hang_up() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                accepted[0] += 1
                connection.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        yield refused, closer
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(5)
        assert accepted[0] > 0, "nobody connected to the closing socket"


def test_dead_runtime_sockets_leave_containers_counted_by_id(
    cgroups: CgroupSandbox, yielder: Path, tmp_path: Path
) -> None:
    with dead_sockets(tmp_path) as (refused, closer):
        sockets = f"{refused},{closer}"
        agent = start(
            tmp_path,
            "--runtime.docker-sockets",
            sockets,
            "--runtime.cri-sockets",
            sockets,
            "--runtime.containerd-socket",
            str(closer),
            "--runtime.timeout",
            "0.5",
        )
        try:
            container_id = uuid.uuid4().hex + uuid.uuid4().hex
            group = cgroups.base / f"docker-{container_id}.scope"
            group.mkdir()
            Workload(yielder, group, 3_000, 1, hold=False)
            scrapes = []
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:  # the lookups fail in the background meanwhile
                scrapes.append(agent.scrape())
            assert assert_counters_monotonic(scrapes) > 0
            last = scrapes[-1]
            assert last.value(YIELDS, container_id=container_id, container="") == 3_000
            errors = last.find("schedwatch_runtime_lookups_total", result="error")
            failed = {dict(labels)["runtime"] for labels, count in errors.items() if count > 0}
            assert failed == {"docker", "cri:refused", "cri:closer", "containerd"}, errors
            assert not last.find("schedwatch_runtime_lookups_total", result="ok")
            cgroups.remove(group)
            assert complaints(agent.log()) == []
        finally:
            assert agent.stop() == 0, agent.log()


# --- the wall clock jumping ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def wall_clock_restored() -> Iterator[None]:
    """Whatever the body does to CLOCK_REALTIME, put it back where it would be, measured with CLOCK_MONOTONIC."""
    wall, mono = time.clock_gettime(time.CLOCK_REALTIME), time.clock_gettime(time.CLOCK_MONOTONIC)
    try:
        yield
    finally:
        time.clock_settime(time.CLOCK_REALTIME, wall + time.clock_gettime(time.CLOCK_MONOTONIC) - mono)


def jump_wall_clock(seconds: float) -> None:
    time.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME) + seconds)


def short_lived(binary: Path, group: Path, *args: int) -> None:
    """A workload that exits a little after its work: long enough to be placed by its announcement."""
    workload = Workload(binary, group, *args)
    time.sleep(0.3)
    assert workload.release() == 0


@pytest.mark.machine_wide  # every process on the machine sees the clock move: run alone, last
def test_wall_clock_jumps_change_nothing(cgroups: CgroupSandbox, yielder: Path, tmp_path: Path) -> None:
    require_root()
    grace = 10.0
    agent = start(tmp_path, "--workloads-by", "process", "--series-grace", str(grace))
    try:
        gone, placed = cgroups.make("clock-gone"), cgroups.make("clock-placed")
        short_lived(yielder, gone, 1_000, 1)
        scrapes = [agent.scrape()]
        assert scrapes[-1].value(YIELDS, cgroup=cgroups.relative(gone)) == 1_000
        cgroups.remove(gone)
        removed_at = time.monotonic()
        with wall_clock_restored():
            jump_wall_clock(3600)
            scrapes.append(agent.scrape())
            jump_wall_clock(-7200)
            scrapes.append(agent.scrape())
        assert time.monotonic() - removed_at < grace, "the machine is too slow for this test's grace period"
        for scrape in scrapes[1:]:
            assert scrape.value(YIELDS, cgroup=cgroups.relative(gone)) == 1_000  # not expired early
        with wall_clock_restored():
            jump_wall_clock(3600)
            short_lived(yielder, placed, 500, 2)  # exits while the clock is an hour ahead
            scrapes.append(agent.scrape())
            jump_wall_clock(-7200)
            short_lived(yielder, placed, 250, 2)  # and while it is an hour behind
            scrapes.append(agent.scrape())
        assert scrapes[-1].value(YIELDS, cgroup=cgroups.relative(placed)) == 1_500  # exited processes placed right
        time.sleep(max(0.0, removed_at + grace + 0.5 - time.monotonic()))
        scrapes.append(agent.scrape())
        assert scrapes[-1].value(YIELDS, cgroup=cgroups.relative(gone)) is None  # and not kept forever
        assert scrapes[-1].value(YIELDS, cgroup=cgroups.relative(placed)) == 1_500
        assert assert_counters_monotonic(scrapes) > 0
        assert complaints(agent.log()) == []
    finally:
        assert agent.stop() == 0, agent.log()
