"""Can BPF run here, and what fixes it: the one place that answers, from the machine's facts (and, once a program
was tried, from the loader's error).

What is missing comes first in the order a person fixes it: the capabilities, tracefs (absent, or there but
unreadable), the tracepoints a program needs, the kernel refusing although the capabilities are there (memlock,
seccomp, an LSM), bcc, the kernel headers. Each reason is one line and each fix says what to do. The perf mode's
check shares the tracefs answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.bpf import BpfUnavailable
from agent.bpf.compile import BCC_INSTALL_FIX, BCC_UPGRADE_FIX
from agent.collectors import Availability
from agent.machine import kernel
from agent.machine.facts import MachineFacts

# Kernel releases from which the capabilities below exist or matter.
CAP_BPF_SINCE = (5, 8)  # CAP_BPF and CAP_PERFMON; before, loading programs needs CAP_SYS_ADMIN
MEMCG_ACCOUNTING_SINCE = (5, 11)  # BPF maps charged to the memory cgroup, no longer to RLIMIT_MEMLOCK
LOAD_FIX = "if other headers do not help, report it with `schedwatch check --json`"
VERIFIER_FIX = (
    "a defect of schedwatch on this kernel: report it with `schedwatch check --json` and the agent's log "
    "(it holds the verifier's last lines); --mode auto counts what it can of this collector without BPF meanwhile"
)


def bpf_support(facts: MachineFacts) -> Availability:
    """Whether BPF programs can be loaded here at all; if not, why and the fix."""
    return bpf_availability(facts, ())


def bpf_availability(facts: MachineFacts, required: Sequence[tuple[str, str]]) -> Availability:
    """Whether a BPF program needing the *required* tracepoints can be loaded here; if not, why and the fix."""
    missing_caps = missing_bpf_capabilities(facts)
    if missing_caps:
        return Availability(False, _missing_capabilities_reason(missing_caps), _capabilities_fix(facts, missing_caps))
    tracefs = tracefs_availability(facts)
    if not tracefs.ok:
        return tracefs
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
    if facts.bcc is not None and facts.bcc.version is None:
        return Availability(False, facts.bcc.error or "bcc cannot be imported", BCC_INSTALL_FIX)
    if facts.bcc is not None and facts.bcc.error:
        return Availability(False, facts.bcc.error, BCC_UPGRADE_FIX)
    if facts.headers is None:
        return Availability(False, "no kernel headers", facts.headers_error)
    return Availability(True)


def tracefs_availability(facts: MachineFacts) -> Availability:
    """Whether tracefs can be read here (BPF's and perf counters' tracepoints are found there): mounted and readable,
    mounted but readable by root only, or not mounted."""
    if facts.tracefs is not None:
        return Availability(True)
    if facts.tracefs_denied is not None:
        return Availability(
            False,
            f"tracefs at {facts.tracefs_denied} is readable by root only",
            "run it as root, e.g. with sudo (the DaemonSet runs the agent as root)",
        )
    if facts.capabilities["CAP_SYS_ADMIN"]:
        mount = "mount -t tracefs tracefs /sys/kernel/tracing (schedwatch does this itself with CAP_SYS_ADMIN)"
    else:
        mount = (
            "in a container, mount the host's /sys/kernel/tracing read-only (the DaemonSet does); on the host, "
            "mount -t tracefs tracefs /sys/kernel/tracing"
        )
    return Availability(False, "tracefs is not mounted", mount)


def load_failure(error: BpfUnavailable) -> Availability:
    """A program that passed the checks and still did not load: the loader's reason (the verifier's, when it
    refused the program), and the fix."""
    return Availability(False, str(error), error.fix or (VERIFIER_FIX if error.verifier_log else LOAD_FIX))


def missing_bpf_capabilities(facts: MachineFacts) -> list[str]:
    """The capabilities to add so that the BPF programs can be loaded and attached; empty when none are missing.

    On kernels >= 5.8 that is CAP_BPF (programs and maps) and CAP_PERFMON (tracepoint programs, perf events);
    older kernels know neither, and want CAP_SYS_ADMIN, which also stands in for both on newer ones.
    """
    caps = facts.capabilities
    if caps["CAP_SYS_ADMIN"]:
        return []
    if _kernel_before(facts, CAP_BPF_SINCE):
        return ["CAP_SYS_ADMIN"]
    return [name for name in ("CAP_BPF", "CAP_PERFMON") if not caps[name]]


def needs_memlock(facts: MachineFacts) -> bool:
    """Whether BPF maps are charged to RLIMIT_MEMLOCK here and the limit is low enough to matter."""
    low = facts.memlock_bytes is not None and facts.memlock_bytes < 64 * 1024 * 1024
    return _kernel_before(facts, MEMCG_ACCOUNTING_SINCE) and low and not facts.capabilities["CAP_SYS_RESOURCE"]


def _kernel_before(facts: MachineFacts, version: tuple[int, int]) -> bool:
    """Whether the running kernel is older than *version* (False when the release cannot be read)."""
    release = kernel.version_tuple(facts.release)
    return bool(release) and release[:2] < version


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
    if facts.bpf_refused and needs_memlock(facts):
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
