"""`schedwatch check` renders one gathered report: golden text and JSON for four machines (this VM as root; the same
VM seen by an unprivileged user; as root with one program the verifier refuses; as root where bcc cannot be
imported), the JSON carries every fact the text states, and the mode and the collectors' reasons are the ones the
owner of "can BPF run here" gives for those facts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from agent.bpf.compile import BCC_UPGRADE_FIX, bcc_too_old
from agent.collectors import registry
from agent.collectors.common.availability import bpf_support, tracefs_availability
from agent.collectors.modes import BPF, MISSING, PERF, ModeChoice, choose
from agent.collectors.starting import LOAD_FAILED, NOT_RUNNING, UNSUPPORTED, Degraded
from agent.commands.check import CheckReport, CollectorCheck, WebCheck, to_json, to_text
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.facts import BccFound, MachineFacts
from agent.machine.kernel import HeadersChoice
from tests.support.agent import REPO
from tests.support.schemas import assert_valid
from tests.unit.locations import UNIT_FIXTURES

GOLDEN = UNIT_FIXTURES / "check"
UPDATE = os.environ.get("SCHEDWATCH_UPDATE_GOLDEN") == "1"  # rewrite the golden files from the code

HEADERS = HeadersChoice(
    "debian-nearest",
    Path("/usr/src/linux-headers-6.1.0-57-cloud-amd64"),
    "running 6.18.44-fc-v657, using linux-headers-6.1.0-57-cloud-amd64 (+ linux-headers-6.1.0-57-common); "
    "tracepoint-only programs",
    bcc_kernel_source=Path("/run/schedwatch/kernel-headers/linux-headers-6.1.0-57-cloud-amd64"),
)
LAYOUT = CgroupLayout(
    unified=Path("/sys/fs/cgroup/unified"),
    v1={name: Path("/sys/fs/cgroup", name) for name in ("cpu", "cpuacct", "memory")},
)
ALL_CAPS = {
    "CAP_SYS_PTRACE": True,
    "CAP_SYS_ADMIN": True,
    "CAP_SYS_RESOURCE": False,
    "CAP_PERFMON": True,
    "CAP_BPF": True,
}
RUNTIMES = {
    "/var/run/docker.sock": "missing (containers are labelled by id only)",
    "/run/podman/podman.sock": "listening",
}
BCC = BccFound("0.26.0", "/usr/lib/python3/dist-packages/bcc")
# What the verifier said when a test define made it refuse sched.bpf.c here (tests/kernel/test_refused_program.py).
REFUSED = (
    "cannot load sched.bpf.c: the kernel's verifier refused tracepoint__sched__sched_switch: R1 invalid mem access "
    "'scalar' (at instruction 2: r1 = *(u64 *)(r1 +0))"
)
COLLECTORS = (
    CollectorCheck("syscalls", "sched_yield and futex calls, futex wait time (bpf/syscalls.bpf.c)", True),
    CollectorCheck("sched", "off-CPU time (preempted, blocked) and run-queue latency (bpf/sched.bpf.c)", True),
    CollectorCheck("cgroup_cpu", "CPU limit, throttling, CPU used and threads per workload", True),
)


def root_report() -> CheckReport:
    facts = MachineFacts(
        release="6.18.44-fc-v657",
        is_root=True,
        capabilities=ALL_CAPS,
        btf=True,
        tracefs=Path("/sys/kernel/tracing"),
        headers=HEADERS,
        headers_error="",
        cgroups=LAYOUT,
        cgroup_root=Path("/sys/fs/cgroup/unified"),
        bpf_stats=False,
        memlock_bytes=8388608,
        bcc=BCC,
    )
    return CheckReport(
        version="0.1.0",
        facts=facts,
        workloads_by="cgroup",
        workloads="by cgroup2 id, placed in the cgroup2 tree",
        futex2=("futex_waitv", "futex_wait", "futex_wake", "futex_requeue"),
        sched_switch_blocked_mask=0xFF,
        delay_accounting=False,
        runtimes=RUNTIMES,
        mode_requested="auto",
        mode=ModeChoice("bpf", "the BPF programs can be loaded here"),
        collectors=COLLECTORS,
        mode_collectors=(),
        loaded=True,
        web=WebCheck("0.0.0.0:17953", True, "prometheus", 64, 10.0),
    )


def unprivileged_report() -> CheckReport:
    facts = MachineFacts(
        release="6.18.44-fc-v657",
        is_root=False,
        capabilities=dict.fromkeys(ALL_CAPS, False),
        btf=True,
        tracefs=None,
        headers=HEADERS,
        headers_error="",
        cgroups=LAYOUT,
        cgroup_root=Path("/sys/fs/cgroup/unified"),
        bpf_stats=False,
        memlock_bytes=8388608,
        bpf_refused="EPERM (Operation not permitted)",
        tracefs_denied=Path("/sys/kernel/tracing"),
        bcc=BCC,
    )
    refused = bpf_support(facts)
    needs_root = "not checked: tracefs is readable by root only here (run it as root, e.g. with sudo)"
    return CheckReport(
        version="0.1.0",
        facts=facts,
        workloads_by="cgroup",
        workloads="by cgroup2 id, placed in the cgroup2 tree",
        futex2=None,
        sched_switch_blocked_mask=None,
        delay_accounting=False,
        runtimes={"/run/podman/podman.sock": "not reachable: permission denied"},
        mode_requested="auto",
        mode=choose("auto", facts),
        collectors=(
            CollectorCheck("syscalls", COLLECTORS[0].description, False, refused.reason, refused.fix),
            CollectorCheck("sched", COLLECTORS[1].description, False, refused.reason, refused.fix),
            COLLECTORS[2],
        ),
        mode_collectors=(
            CollectorCheck("sched", "run-queue wait and on-CPU time from /proc/TID/schedstat (no BPF)", True),
            COLLECTORS[2],
        ),
        degraded={
            "syscalls": Degraded(NOT_RUNNING, UNSUPPORTED, refused.reason, refused.fix),
            "sched": Degraded("procfs", UNSUPPORTED, refused.reason, refused.fix),
        },
        loaded=True,
        web=WebCheck(
            "127.0.0.1:17953",
            False,
            "prometheus",
            64,
            10.0,
            "--web.basic-auth-user and --web.basic-auth-password-file go together: give both or neither",
        ),
        not_checked={"futex2": needs_root, "sched_switch": needs_root},
    )


def refused_program_report() -> CheckReport:
    """Auto on this VM as root, where the verifier refused sched.bpf.c: sched counts in its perf form."""
    fix = "a defect of schedwatch on this kernel: report it"
    root = root_report()
    return replace(
        root,
        mode=replace(root.mode, reason=f"{root.mode.reason}, except for sched (degraded)"),
        collectors=(
            COLLECTORS[0],
            CollectorCheck("sched", COLLECTORS[1].description, False, REFUSED, fix),
            COLLECTORS[2],
        ),
        mode_collectors=(
            CollectorCheck(
                "sched",
                "run-queue wait and on-CPU time from /proc/TID/schedstat (no BPF)",
                True,
            ),
        ),
        degraded={"sched": Degraded("perf", LOAD_FAILED, REFUSED, fix)},
    )


def no_bcc_report() -> CheckReport:
    """Auto on this VM as root with bcc's module nowhere the loader looks: perf mode, and why."""
    root = root_report()
    bcc = BccFound(
        None,
        error="bcc cannot be imported (No module named 'bcc'; looked in this Python's path and "
        "/usr/lib/python3/dist-packages and /usr/lib/python3/site-packages)",
    )
    facts = replace(root.facts, bcc=bcc)
    missing = bpf_support(facts)
    return replace(
        root,
        facts=facts,
        mode=choose("auto", facts),
        collectors=tuple(
            CollectorCheck(c.name, c.description, False, missing.reason, missing.fix) if c.name != "cgroup_cpu" else c
            for c in COLLECTORS
        ),
        mode_collectors=(
            CollectorCheck("syscalls", "sched_yield and futex calls by op (counting perf events; no BPF)", True),
            CollectorCheck("sched", "run-queue wait and on-CPU time from /proc/TID/schedstat (no BPF)", True),
            COLLECTORS[2],
        ),
        degraded={name: Degraded("perf", UNSUPPORTED, missing.reason, missing.fix) for name in ("syscalls", "sched")},
    )


REPORTS = {
    "root": root_report,
    "unprivileged": unprivileged_report,
    "refused_program": refused_program_report,
    "no_bcc": no_bcc_report,
}


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_text_is_the_golden_text(name: str) -> None:
    written = to_text(REPORTS[name]()) + "\n"
    golden = GOLDEN / f"{name}.txt"
    if UPDATE:
        golden.write_text(written)
    assert written == golden.read_text()


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_json_is_the_golden_json(name: str) -> None:
    written = json.dumps(to_json(REPORTS[name]()), indent=2, sort_keys=True) + "\n"
    golden = GOLDEN / f"{name}.json"
    if UPDATE:
        golden.write_text(written)
    assert written == golden.read_text()


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_the_json_carries_every_fact_the_text_states(name: str) -> None:
    report = REPORTS[name]()
    text, document = to_text(report), to_json(report)
    machine = document["machine"]
    assert machine["release"] in text and report.facts.release == machine["release"]
    for capability, held in machine["capabilities"].items():
        assert f"{capability} {'yes' if held else 'no'}" in text
    assert (machine["tracefs"] or machine["tracefs_denied"]) in text
    assert machine["headers"]["path"] in text
    bcc = machine["bcc"]
    if bcc["version"] is None:
        assert f"bcc          CANNOT BE IMPORTED: {bcc['error']}" in text
    else:
        assert f"bcc          {bcc['version']} from {bcc['path']}" in text
    assert machine["cgroups"]["unified"] in text
    for controller in machine["cgroups"]["v1"]:
        assert controller in text
    assert document["workloads"] in text
    if document["futex2"] is None:
        assert "futex2" in document["not_checked"] and document["not_checked"]["futex2"] in text
    else:
        assert ", ".join(document["futex2"]) in text
    if document["sched_switch_blocked_mask"] is not None:
        assert f"prev_state & {document['sched_switch_blocked_mask']:#x}" in text
    assert ("delayacct    off" in text) == (document["delay_accounting"] is False)
    for path, state in document["runtimes"].items():
        assert f"{path}: {state}" in text
    assert f"mode         {document['mode']['mode']} (--mode {document['mode']['requested']})" in text
    for missing in document["mode"]["missing"]:
        assert f"mode lacks   {missing}" in text
    for group in ("collectors", "mode_collectors"):
        for collector in document[group].values():
            assert collector["name"] in text
            if collector["ok"]:
                assert collector["description"] in text
            else:
                assert f"CANNOT RUN: {collector['reason']} — fix: {collector['fix']}" in text
    for name, degraded in document["degraded"].items():
        assert f"degraded     {name} " in text and f"): {degraded['reason']}" in text
    web = document["web"]
    if web["problem"]:
        assert f"web          CANNOT SERVE: {web['problem']}" in text
    else:
        assert f"{'https' if web['tls'] else 'http'} on {web['listen']}" in text
        assert f"at most {web['max_connections']} connections, {web['timeout_seconds']:g} s timeout" in text
        assert (f"basic auth as {web['basic_auth_user']}" if web["basic_auth_user"] else "no basic auth") in text
    assert document["ok"] == report.ok == (name == "root")
    assert document["mode"]["mode"] == (BPF if name in ("root", "refused_program") else report.mode.mode)
    assert_valid(json.loads(json.dumps(document)))
    assert document["schema"] == "schedwatch.check/v1"


def test_perf_mode_lists_what_it_cannot_tell() -> None:
    report = root_report()
    perf = CheckReport(**{**report.__dict__, "mode": ModeChoice(PERF, "asked for with --mode", MISSING[PERF])})
    text = to_text(perf)
    assert all(f"mode lacks   {missing}" in text for missing in MISSING[PERF])


def test_a_tracefs_that_cannot_be_read_is_not_called_absent() -> None:
    """Unprivileged, tracefs is there and root's alone: nothing says it is not mounted or to mount it."""
    report = unprivileged_report()
    text = to_text(report)
    assert "  tracefs      /sys/kernel/tracing: mounted, readable by root only — fix: run it as root" in text
    assert "not mounted" not in text and "mount -t tracefs" not in text, text
    assert report.mode.reason.endswith(
        "perf counters cannot either: tracefs at /sys/kernel/tracing is readable by root only"
    )
    assert tracefs_availability(report.facts).reason == "tracefs at /sys/kernel/tracing is readable by root only"


def test_without_bcc_no_bpf_collector_is_ok_and_check_fails() -> None:
    report = no_bcc_report()
    assert not report.ok
    assert report.mode.mode != BPF and "bcc cannot be imported (No module named 'bcc'" in report.mode.reason
    assert [c.name for c in report.collectors if not c.ok] == ["syscalls", "sched"]
    text = to_text(report)
    assert "  bcc          CANNOT BE IMPORTED: bcc cannot be imported (No module named 'bcc'" in text
    assert "apt-get install python3-bpfcc" in text
    assert to_json(report)["machine"]["bcc"]["version"] is None


def test_a_bcc_older_than_the_programs_need_is_too_old_not_ready() -> None:
    """bcc 0.18 (Debian 11's, Ubuntu 22.04's) imports, but its helpers.h lacks bpf_task_pt_regs: check said "the BPF
    programs can be loaded here" and marked every BPF collector ok; the compiler refused them only at load."""
    assert bcc_too_old("0.21.0") and bcc_too_old("0.18.0+ds") and bcc_too_old("0.9")
    assert bcc_too_old("0.22.0") == bcc_too_old("0.26.0") == bcc_too_old("unknown") == ""
    root = root_report()
    old = BccFound("0.18.0", "/usr/lib/python3/dist-packages/bcc", error=bcc_too_old("0.18.0"))
    facts = replace(root.facts, bcc=old)
    refused = bpf_support(facts)
    assert not refused.ok
    assert refused.reason == "bcc 0.18.0 is too old: the programs call helpers that bcc declares from 0.22.0 on " + (
        "(bpf_task_pt_regs)"
    )
    assert refused.fix.startswith("install bcc 0.22.0 or later")
    assert choose("auto", facts).mode != BPF
    report = replace(root, facts=facts, mode=choose("auto", facts))
    text = to_text(report)
    where = "it is at /usr/lib/python3/dist-packages/bcc"
    assert f"  bcc          TOO OLD: {old.error}; {where} — fix: install bcc 0.22.0 or later" in text
    assert "can be loaded here" not in text
    document = to_json(report)
    assert document["machine"]["bcc"]["version"] == "0.18.0" and document["machine"]["bcc"]["error"] == old.error
    assert_valid(json.loads(json.dumps(document)))


def test_the_loader_refuses_a_bcc_older_than_the_programs_need(tmp_path: Path) -> None:
    """A bcc package that says it is 0.21.0 on the path (an old bcc cannot be installed beside this machine's): the
    loader's import refuses it with the upgrade fix, and check's child reports its version with why it cannot serve."""
    package = tmp_path / "bcc"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text("__version__ = '0.21.0'\n")
    script = (
        "import json\n"
        "from agent.bpf import BpfUnavailable\n"
        "from agent.bpf.compile import bcc_origin, import_bcc\n"
        "try:\n"
        "    import_bcc()\n"
        "except BpfUnavailable as error:\n"
        "    print(json.dumps([str(error), error.fix, bcc_origin()]))\n"
    )
    environment = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, check=True)
    error, fix, origin = json.loads(done.stdout)
    assert error == bcc_too_old("0.21.0") != ""
    assert fix == BCC_UPGRADE_FIX
    assert origin == {"version": "0.21.0", "path": str(package), "outside_path": False, "error": error}


def test_the_collectors_table_is_aligned_for_every_collector_name() -> None:
    checks = tuple(CollectorCheck(name, f"what {name} counts", True) for name in registry())
    text = to_text(replace(root_report(), collectors=checks))
    rows = text.split("\ncollectors\n")[1].splitlines()
    assert len(rows) == len(registry()) >= 7
    columns = {row.index(" ok ") for row in rows}
    assert len(columns) == 1, rows
    assert all(row[2:].split()[0] in registry() for row in rows)
