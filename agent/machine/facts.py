"""What this machine allows, gathered once: the input of `schedwatch check` and of each collector's check.

Besides reading the kernel's answers (capabilities, tracefs, headers), :func:`gather` asks the kernel twice in the
way the BPF collectors will: it creates one tiny BPF map and opens one tracepoint perf event, and closes both. A
capability in CapEff is not a promise: a seccomp profile, an LSM or a low RLIMIT_MEMLOCK (kernels < 5.11) can still
refuse, and only these two calls tell which one, before bcc's less specific errors would.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
from dataclasses import dataclass
from pathlib import Path

from agent.machine import kernel
from agent.machine.cgroups.layout import CgroupLayout, layout_under, read_layout
from agent.machine.procfs import ProcFS

_SYSCALLS = {"x86_64": {"bpf": 321, "perf_event_open": 298}, "aarch64": {"bpf": 280, "perf_event_open": 241}}
_BPF_MAP_CREATE = 0
_BPF_MAP_TYPE_ARRAY = 2
_PERF_TYPE_TRACEPOINT = 2
_PERF_TYPE_SOFTWARE = 1
_PERF_COUNT_SW_CPU_CLOCK = 0
_PERF_ATTR_SIZE = 128
_PERF_FLAG_FD_CLOEXEC = 8
_PROBE_TRACEPOINT = ("sched", "sched_switch")


@dataclass(frozen=True)
class BccFound:
    """Whether bcc's Python module imports where the BPF loader imports it, which version, and from where."""

    version: str | None  # None: it does not import
    path: str = ""  # the directory of the bcc package imported; "" when it does not import
    outside_path: bool = False  # found only in the distribution's dist-packages, outside this Python's own path
    error: str = ""  # why it cannot build the programs: it does not import (version None), or it is too old


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
    seccomp_filtered: bool = False  # a seccomp filter is applied to this process (a container's profile)
    memlock_bytes: int | None = None  # RLIMIT_MEMLOCK's soft limit; None: unlimited
    bpf_refused: str | None = None  # strerror of creating a BPF map, None when it worked
    perf_refused: str | None = None  # strerror of opening a tracepoint perf event, None when it worked or was not tried
    sampling_refused: str | None = None  # strerror of opening a cpu-clock sampling event, None when it worked
    tracefs_denied: Path | None = None  # tracefs is there, but this process may not read it (not root)
    bcc: BccFound | None = None  # None: not looked for (gather() leaves it to the BPF wing: agent.bpf.handover)


def gather(cgroup_root: Path | None = None) -> MachineFacts:
    """Read the machine; changes nothing (the two probes' map and perf event are closed at once)."""
    release = kernel.kernel_release()
    headers: kernel.HeadersChoice | None = None
    headers_error = ""
    try:
        headers = kernel.find_kernel_headers(release, os.environ)
    except kernel.HeadersNotFound as error:
        headers_error = str(error)
    layout = read_layout() if cgroup_root is None else layout_under(cgroup_root)
    tracefs = kernel.tracefs_root()
    memlock = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    return MachineFacts(
        release=release,
        is_root=os.geteuid() == 0,
        capabilities=kernel.effective_capabilities(),
        btf=kernel.has_btf(),
        tracefs=tracefs,
        headers=headers,
        headers_error=headers_error,
        cgroups=layout,
        cgroup_root=layout.unified,
        bpf_stats=kernel.bpf_stats_enabled(),
        seccomp_filtered=seccomp_filtered(),
        memlock_bytes=None if memlock == resource.RLIM_INFINITY else memlock,
        bpf_refused=probe_bpf_map(),
        perf_refused=probe_tracepoint_event(tracefs),
        sampling_refused=probe_sampling_event(),
        tracefs_denied=kernel.tracefs_denied() if tracefs is None else None,
    )


def seccomp_filtered(proc: ProcFS | None = None) -> bool:
    """Whether a seccomp filter applies to this process (Seccomp: 2), as in a container with a default profile."""
    for line in ((proc or ProcFS()).read_text("self", "status") or "").splitlines():
        if line.startswith("Seccomp:"):
            return line.split()[1] == "2"
    return False


def _syscall(name: str) -> tuple[ctypes.CDLL, int] | None:
    number = _SYSCALLS.get(os.uname().machine, {}).get(name)
    return None if number is None else (ctypes.CDLL(None, use_errno=True), number)


def probe_bpf_map() -> str | None:
    """Create and close a one-entry BPF array map; the error if the kernel refuses, None if it allows it."""
    call = _syscall("bpf")
    if call is None:
        return None
    libc, number = call
    attr = (ctypes.c_uint32 * 16)(_BPF_MAP_TYPE_ARRAY, 4, 4, 1)  # map_type, key_size, value_size, max_entries
    return _closed(int(libc.syscall(number, _BPF_MAP_CREATE, ctypes.byref(attr), ctypes.sizeof(attr))))


def probe_tracepoint_event(tracefs: Path | None) -> str | None:
    """Open and close a disabled, CPU-wide perf event on sched:sched_switch, as attaching a program does.

    None when it works, or when it cannot be tried (no tracefs, or no such tracepoint: reported elsewhere).
    """
    if tracefs is None:
        return None
    try:
        tracepoint_id = int((tracefs / "events" / _PROBE_TRACEPOINT[0] / _PROBE_TRACEPOINT[1] / "id").read_text())
    except (OSError, ValueError):
        return None
    return _probe_perf_event(_PERF_TYPE_TRACEPOINT, tracepoint_id)


def probe_sampling_event() -> str | None:
    """Open and close a disabled software cpu-clock sampling event on CPU 0, as on-CPU sampling does (it needs no
    hardware PMU). None when it works or cannot be tried."""
    return _probe_perf_event(_PERF_TYPE_SOFTWARE, _PERF_COUNT_SW_CPU_CLOCK, sample_freq=49)


def _probe_perf_event(kind: int, config: int, sample_freq: int = 0) -> str | None:
    """Open and close a disabled perf event of *kind* and *config* on CPU 0 for every process (sampling at
    *sample_freq* Hz when given); the error if the kernel refuses, None if it allows it or it cannot be tried."""
    call = _syscall("perf_event_open")
    if call is None:
        return None
    libc, number = call
    attr = (ctypes.c_uint8 * _PERF_ATTR_SIZE)()
    ctypes.c_uint32.from_buffer(attr, 0).value = kind
    ctypes.c_uint32.from_buffer(attr, 4).value = _PERF_ATTR_SIZE
    ctypes.c_uint64.from_buffer(attr, 8).value = config
    flags = 1  # disabled: counts nothing while open
    if sample_freq:
        ctypes.c_uint64.from_buffer(attr, 16).value = sample_freq
        flags |= 1 << 10  # freq: sample_freq is a frequency, not a period
    ctypes.c_uint64.from_buffer(attr, 40).value = flags
    return _closed(int(libc.syscall(number, ctypes.byref(attr), -1, 0, -1, _PERF_FLAG_FD_CLOEXEC)))


def _closed(fd: int) -> str | None:
    """Close *fd* the kernel gave; the error it gave instead when negative."""
    if fd < 0:
        return _strerror(ctypes.get_errno())
    os.close(fd)
    return None


def _strerror(number: int) -> str:
    return f"{errno.errorcode.get(number, str(number))} ({os.strerror(number)})"
