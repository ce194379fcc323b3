"""What this machine allows, gathered once: the input of `schedwatch check` and of each collector's check."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent import kernel
from agent.cgroups import CgroupLayout, layout_under, read_layout


@dataclass(frozen=True)
class MachineFacts:
    """Kernel, headers, tracefs, capabilities and cgroup layout of this machine."""

    release: str
    is_root: bool
    capabilities: dict[str, bool]
    btf: bool
    tracefs: Path | None
    headers: kernel.HeadersChoice | None
    headers_error: str
    cgroups: CgroupLayout
    cgroup_root: Path | None
    bpf_stats: bool | None

    @property
    def can_load_bpf(self) -> bool:
        """CAP_SYS_ADMIN, or CAP_BPF (load programs) with CAP_PERFMON (attach to tracepoints)."""
        caps = self.capabilities
        return caps["CAP_SYS_ADMIN"] or (caps["CAP_BPF"] and caps["CAP_PERFMON"])


def gather(cgroup_root: Path | None = None) -> MachineFacts:
    """Read the machine; changes nothing."""
    release = kernel.kernel_release()
    headers: kernel.HeadersChoice | None = None
    headers_error = ""
    try:
        headers = kernel.find_kernel_headers(release, os.environ)
    except kernel.HeadersNotFound as error:
        headers_error = str(error)
    layout = read_layout() if cgroup_root is None else layout_under(cgroup_root)
    return MachineFacts(
        release=release,
        is_root=os.geteuid() == 0,
        capabilities=kernel.effective_capabilities(),
        btf=kernel.has_btf(),
        tracefs=kernel.tracefs_root(),
        headers=headers,
        headers_error=headers_error,
        cgroups=layout,
        cgroup_root=layout.unified,
        bpf_stats=kernel.bpf_stats_enabled(),
    )
