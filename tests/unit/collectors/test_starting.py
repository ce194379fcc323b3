"""What --mode auto records when BPF cannot serve its collectors here: the real factories checked (not loaded) on
facts of a machine without the BPF capabilities, over a cgroup2 tree made in a temporary directory. Only bpf mode's
own collectors are degraded, to the form perf mode runs them in or to nothing; the cgroup files' collectors run in
every mode and are neither degraded nor unable to run. (A program that fails to load where BPF works is tested with
the real verifier in tests/kernel/test_refused_program.py.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from agent import config
from agent.assembly import build_context
from agent.collectors import modes, registry
from agent.collectors.starting import NOT_RUNNING, UNSUPPORTED, start_collectors
from agent.commands.check import collector_checks
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.facts import MachineFacts
from tests.unit.locations import UNIT_FIXTURES

TRACEFS = UNIT_FIXTURES / "tracefs-6.18"
NO_CAPABILITIES = dict.fromkeys(
    ("CAP_SYS_PTRACE", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_PERFMON", "CAP_BPF"), False
)


def test_auto_without_bpf_degrades_bpf_modes_own_collectors_and_no_other(tmp_path: Path) -> None:
    (tmp_path / "cgroup.procs").write_text("")
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    facts = MachineFacts(
        release="6.18.44",
        is_root=True,
        capabilities=NO_CAPABILITIES,
        btf=True,
        tracefs=TRACEFS,
        headers=None,
        headers_error="no headers",
        cgroups=CgroupLayout(unified=tmp_path),
        cgroup_root=tmp_path,
        bpf_stats=False,
    )
    # pressure reads this machine's /proc/pressure: left out to keep the test to the facts above
    settings = dataclasses.replace(config.Settings(), collectors=frozenset(registry()) - {"pressure"}, mode="auto")
    started = start_collectors(
        settings, facts, build_context(settings, facts, IdentityResolver([])), load=False, silent=True
    )
    assert started.mode.mode == modes.PERF
    assert {name: (d.runs_as, d.cause) for name, d in started.degraded.items()} == {
        "syscalls": (modes.PERF, UNSUPPORTED),
        "sched": (modes.PERF, UNSUPPORTED),
        "syscall_families": (NOT_RUNNING, UNSUPPORTED),
        "oncpu": (NOT_RUNNING, UNSUPPORTED),
    }
    assert all(d.reason.startswith("missing CAP_BPF") for d in started.degraded.values())
    assert started.forms == dict.fromkeys(("syscalls", "sched", "cgroup_cpu", "cgroup_memory"), modes.PERF)
    judged = {check.name: check.ok for check in collector_checks(modes.BPF, settings, started)}
    assert judged == {
        "syscalls": False,
        "sched": False,
        "syscall_families": False,
        "oncpu": False,
        "cgroup_cpu": True,
        "cgroup_memory": True,
    }
