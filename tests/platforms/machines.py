"""The platform tier's machines (kernel x cgroup layout) and the kernel tests each one runs.

To add a test module (or one test) to the tier, name it in TIER below, with the layouts it applies to; it then runs
in every machine of those layouts, in one pytest session with the others (so it shares the session's agent: a new
agent costs a compile of every program, minutes under emulation). A test that needs something a layout does not
have (per-cgroup PSI needs cgroup2) is left out of that layout here, with the reason, never skipped inside the VM.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

V2, V1, HYBRID = "v2", "v1", "hybrid"
ALL = (V2, V1, HYBRID)

# The short tier (in `make test`): every program loads, exact yields, run-queue wait against schedstat, a CPU limit
# throttled for real and counted as cpu.stat counts it.
SHORT = (
    "tests/kernel/test_platform.py::test_every_bpf_program_is_loaded",
    "tests/kernel/test_syscalls.py::test_yield_count_is_exact_per_process_and_cgroup",
    "tests/kernel/test_sched.py::test_runqueue_latency_agrees_with_schedstat",
    "tests/kernel/test_cgroup_cpu.py::test_quota_throttling_matches_cpu_stat",
)


@dataclass(frozen=True)
class TierTest:
    """A pytest node id (module, or module::test) and the layouts it runs in."""

    node: str
    layouts: tuple[str, ...] = ALL
    why_not_elsewhere: str = ""


TIER = (
    *(TierTest(node) for node in SHORT),
    TierTest("tests/kernel/test_platform.py"),
    TierTest("tests/kernel/test_placement.py"),
    TierTest("tests/kernel/test_syscalls.py::test_futex_calls_by_op_and_wait_time"),
    TierTest("tests/kernel/test_sched.py::test_sleeping_thread_is_blocked_not_preempted"),
    TierTest("tests/kernel/test_families.py::test_calls_by_family_are_exact"),
    TierTest("tests/kernel/test_cgroup_cpu.py"),
    TierTest("tests/kernel/test_pressure.py", (V2, HYBRID), "per-cgroup PSI files exist only in cgroup2"),
)


@dataclass(frozen=True)
class Machine:
    """A kernel (a Debian series and flavour, or None: this machine's own, run in place) and a cgroup layout."""

    name: str
    series: str | None
    flavour: str | None
    layout: str

    @property
    def in_vm(self) -> bool:
        return self.series is not None


MACHINES = (
    Machine("debian-6.1-v2", "6.1", "amd64", V2),
    Machine("debian-6.1-v1", "6.1", "amd64", V1),
    Machine("debian-6.1-rt-v2", "6.1", "rt-amd64", V2),
    Machine("debian-6.12-v2", "6.12", "amd64", V2),
    Machine("this-host", None, None, HYBRID),
)
SHORT_MACHINE = MACHINES[0]


def nodes_for(layout: str, short: bool = False) -> list[str]:
    """The pytest node ids one machine of *layout* runs (the short tier's alone with *short*)."""
    if short:
        return list(SHORT)
    nodes = [test.node for test in TIER if layout in test.layouts]
    whole = {node for node in nodes if "::" not in node}
    kept: list[str] = []
    for node in nodes:  # a test of a module run whole is not named again: pytest would run it twice
        if node not in kept and (node in whole or node.split("::")[0] not in whole):
            kept.append(node)
    return kept


def left_out(layout: str) -> list[TierTest]:
    """The tier's tests a machine of *layout* does not run, each with why."""
    return [test for test in TIER if layout not in test.layouts]


def pytest_command(nodes: list[str], results: Path, basetemp: Path) -> list[str]:
    """The pytest run of one machine (in its VM, or in place): verbose, its junit XML into *results*, its temporary
    files (the agents' logs among them) in *basetemp*."""
    junit, temporary = f"--junitxml={results / 'junit.xml'}", f"--basetemp={basetemp}"
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-ra", "-v", junit, temporary, *nodes]
