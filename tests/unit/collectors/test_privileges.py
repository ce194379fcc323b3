"""What a BPF collector's check says about privileges on kernels and settings this machine cannot be put in.

The machine's own answers (kernel 6.18, the capabilities a container gets, the runtime's seccomp profile) are
tested for real in tests/containers/test_capabilities.py; older kernels and a low memlock limit only here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from agent.collectors.common.availability import bpf_availability, missing_bpf_capabilities, needs_memlock
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.facts import MachineFacts

NO_CAPABILITIES = dict.fromkeys(
    ("CAP_SYS_PTRACE", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE", "CAP_PERFMON", "CAP_BPF"), False
)


def machine(release: str = "6.18.0", **capabilities: bool) -> MachineFacts:
    return MachineFacts(
        release=release,
        is_root=True,
        capabilities={**NO_CAPABILITIES, **{f"CAP_{name}": value for name, value in capabilities.items()}},
        btf=True,
        tracefs=None,
        headers=None,
        headers_error="no headers",
        cgroups=CgroupLayout(unified=Path("/sys/fs/cgroup")),
        cgroup_root=Path("/sys/fs/cgroup"),
        bpf_stats=False,
    )


def test_a_recent_kernel_names_the_missing_capability_of_the_two() -> None:
    assert missing_bpf_capabilities(machine(BPF=True)) == ["CAP_PERFMON"]
    assert missing_bpf_capabilities(machine(PERFMON=True)) == ["CAP_BPF"]
    assert missing_bpf_capabilities(machine()) == ["CAP_BPF", "CAP_PERFMON"]
    assert missing_bpf_capabilities(machine(BPF=True, PERFMON=True)) == []
    assert missing_bpf_capabilities(machine(SYS_ADMIN=True)) == []


def test_a_kernel_before_5_8_asks_for_sys_admin_and_points_at_the_overlay() -> None:
    old = machine("5.4.0-150-generic", BPF=True, PERFMON=True)
    assert missing_bpf_capabilities(old) == ["CAP_SYS_ADMIN"]
    result = bpf_availability(old, [])
    assert not result.ok
    assert result.reason == "missing CAP_SYS_ADMIN (kernels < 5.8 have no CAP_BPF or CAP_PERFMON)"
    assert "--cap-add=SYS_ADMIN" in result.fix and "overlays/old-kernels" in result.fix


def test_both_missing_are_named_with_both_flags() -> None:
    result = bpf_availability(machine(), [])
    assert result.reason.startswith("missing CAP_BPF (create maps, load programs) and CAP_PERFMON")
    assert "--cap-add=BPF --cap-add=PERFMON" in result.fix


def test_a_refused_map_on_a_kernel_before_5_11_with_a_low_memlock_asks_for_sys_resource(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    old = replace(
        machine("5.10.0", BPF=True, PERFMON=True),
        tracefs=tmp_path,
        memlock_bytes=64 * 1024,
        bpf_refused="EPERM (Operation not permitted)",
    )
    result = bpf_availability(old, [])
    assert result.reason.endswith("kernels < 5.11 charge BPF maps to RLIMIT_MEMLOCK (64 KiB here)")
    assert result.fix.startswith("add SYS_RESOURCE")
    # With SYS_RESOURCE, or on a kernel that charges maps to the memory cgroup, memlock is not the reason.
    assert not needs_memlock(replace(old, capabilities={**old.capabilities, "CAP_SYS_RESOURCE": True}))
    assert not needs_memlock(replace(old, release="5.11.0"))


def test_a_refusal_without_seccomp_points_at_lsms(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    refused = replace(machine(BPF=True, PERFMON=True), tracefs=tmp_path, perf_refused="EACCES (Permission denied)")
    result = bpf_availability(refused, [])
    assert result.reason == (
        "the kernel refused perf_event_open() EACCES (Permission denied) although the capabilities are there"
    )
    assert "AppArmor" in result.fix
