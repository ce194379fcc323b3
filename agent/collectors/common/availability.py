"""Whether a BPF collector can run here; if not, what is missing (a capability, tracefs, a tracepoint, headers, or
the kernel refusing) and the fix, in one line each.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.collectors import Availability
from agent.machine import kernel
from agent.machine.facts import MachineFacts


def bpf_availability(facts: MachineFacts, required: Sequence[tuple[str, str]]) -> Availability:
    """Whether a BPF collector needing the *required* tracepoints can run here; if not, why and the fix.

    Each reason names what is missing (a capability, tracefs, a tracepoint, headers) and each fix says what to add.
    """
    missing_caps = facts.missing_bpf_capabilities()
    if missing_caps:
        return Availability(False, _missing_capabilities_reason(missing_caps), _capabilities_fix(facts, missing_caps))
    if facts.tracefs is None:
        mount = (
            "mount -t tracefs tracefs /sys/kernel/tracing (schedwatch does this itself with CAP_SYS_ADMIN)"
            if facts.capabilities["CAP_SYS_ADMIN"]
            else "in a container, mount the host's /sys/kernel/tracing read-only (the DaemonSet does); on the host, "
            "mount -t tracefs tracefs /sys/kernel/tracing"
        )
        return Availability(False, "tracefs is not mounted", mount)
    missing = [f"{c}:{e}" for c, e in required if not kernel.has_tracepoint(c, e, facts.tracefs)]
    if missing:
        return Availability(
            False,
            f"kernel lacks tracepoints {', '.join(missing)}",
            "use a kernel built with CONFIG_FTRACE_SYSCALLS=y and CONFIG_TRACEPOINTS=y",
        )
    refused = _kernel_refusal(facts)
    if refused is not None:
        return refused
    if facts.headers is None:
        return Availability(False, "no kernel headers", facts.headers_error)
    return Availability(True)


_CAPABILITY_NEEDS = {
    "CAP_BPF": "CAP_BPF (create maps, load programs)",
    "CAP_PERFMON": "CAP_PERFMON (load tracepoint programs, attach them with perf_event_open)",
    "CAP_SYS_ADMIN": "CAP_SYS_ADMIN (kernels < 5.8 have no CAP_BPF or CAP_PERFMON)",
}


def _missing_capabilities_reason(missing: Sequence[str]) -> str:
    return "missing " + " and ".join(_CAPABILITY_NEEDS[name] for name in missing)


def _capabilities_fix(facts: MachineFacts, missing: Sequence[str]) -> str:
    names = [name.removeprefix("CAP_") for name in missing]
    flags = " ".join(f"--cap-add={name}" for name in names)
    fix = f"run as root, or add {', '.join(names)} to securityContext.capabilities.add (podman/docker: {flags})"
    if "CAP_SYS_ADMIN" in missing:
        fix += "; deploy/kubernetes/overlays/old-kernels does this"
    return fix


def _kernel_refusal(facts: MachineFacts) -> Availability | None:
    """The capabilities are there, yet the kernel refused the probe map or perf event: say who refuses."""
    refused = [f"bpf() {facts.bpf_refused}"] if facts.bpf_refused else []
    if facts.perf_refused:
        refused.append(f"perf_event_open() {facts.perf_refused}")
    if not refused:
        return None
    what = " and ".join(refused)
    if facts.bpf_refused and facts.needs_memlock():
        return Availability(
            False,
            f"the kernel refused {what}: kernels < 5.11 charge BPF maps to RLIMIT_MEMLOCK "
            f"({(facts.memlock_bytes or 0) // 1024} KiB here)",
            "add SYS_RESOURCE (deploy/kubernetes/overlays/old-kernels does), or raise the memlock limit (ulimit -l)",
        )
    if facts.seccomp_filtered:
        return Availability(
            False,
            f"the kernel refused {what} although the capabilities are there: a seccomp profile filters them",
            "run with seccompProfile: Unconfined (podman/docker: --security-opt seccomp=unconfined), or a profile "
            "that allows bpf() and perf_event_open(); the runtimes' default profiles do not",
        )
    return Availability(
        False,
        f"the kernel refused {what} although the capabilities are there",
        "look for an LSM (AppArmor, SELinux) or kernel lockdown denying bpf(), and for "
        "kernel.perf_event_paranoid; run with appArmorProfile: Unconfined",
    )
