"""The proof that each capability the DaemonSet adds is needed: the image run with each one removed in turn.

Every run takes the DaemonSet's own options (read from the manifest), changes one thing, and asserts what fails:
what `schedwatch check` says, and that the kernel itself refuses (not only the agent's own check). That the
capabilities left out (SYS_ADMIN, SYS_RESOURCE, SYS_PTRACE, DAC_READ_SEARCH) are not needed is shown by
test_image.py, which counts a container's yields exactly, by name, with the DaemonSet's set alone.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.containers import Podman, build_agent_image, daemonset_run_options

DAEMONSET = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "base" / "daemonset.yaml"
BPF_COLLECTORS = ("syscalls", "sched")

# Loads one collector's program directly, past the agent's own checks, to see what the kernel says.
LOAD_DIRECTLY = """
import os, pathlib
from agent.bpf import BpfUnavailable
from agent.bpf.compile import compile_program
from agent.machine import kernel
choice = kernel.find_kernel_headers(kernel.kernel_release(), os.environ)
kernel.prepare_headers(choice, pathlib.Path("/run/schedwatch"))
try:
    compile_program("syscalls.bpf.c", {"MAX_CGROUPS": 64, "MAX_THREADS": 64, "MAX_PROCESSES": 64})
    print("LOADED")
except BpfUnavailable as error:
    print("REFUSED", error)
"""


def daemonset() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(DAEMONSET.read_text())
    return document


def kept_capabilities() -> list[str]:
    container = daemonset()["spec"]["template"]["spec"]["containers"][0]
    added: list[str] = container["securityContext"]["capabilities"]["add"]
    return added


def options_without(
    *, capability: str = "", seccomp_default: bool = False, mount: str = ""
) -> tuple[list[str], list[str]]:
    """The DaemonSet's `podman run` options less one capability, its seccomp setting or one mount; its flags."""
    options, args = daemonset_run_options(daemonset())
    if capability:
        options.remove(f"--cap-add={capability}")
    if seccomp_default:
        at = options.index("seccomp=unconfined")
        del options[at - 1 : at + 1]
    if mount:
        at = next(i for i, option in enumerate(options) if option.startswith(f"{mount}:"))
        del options[at - 1 : at + 1]
    return options, [a for a in args[1:] if not a.startswith("--listen=")]


def in_image(image: str, options: list[str], *command: str, entrypoint: str = "") -> subprocess.CompletedProcess[str]:
    extra = ["--entrypoint", entrypoint] if entrypoint else []
    return subprocess.run(
        ["podman", "run", "--rm", "--network=none", *options, *extra, image, *command],
        capture_output=True,
        text=True,
        timeout=180,
    )


def collector_lines(check_output: str) -> dict[str, str]:
    """`schedwatch check`'s line of each collector, by name."""
    block = check_output.split("\ncollectors\n", 1)[1]
    return {line.split()[0]: line.strip() for line in block.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def image(podman: Podman) -> str:
    return build_agent_image()


def test_the_daemonset_keeps_exactly_bpf_and_perfmon() -> None:
    assert sorted(kept_capabilities()) == ["BPF", "PERFMON"]


def test_with_the_daemonset_capabilities_every_collector_loads(image: str) -> None:
    options, flags = options_without()
    result = in_image(image, options, "check", *flags)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"privileges .*CAP_SYS_ADMIN no.*CAP_PERFMON yes, CAP_BPF yes", result.stdout), result.stdout
    for name, line in collector_lines(result.stdout).items():
        assert re.match(rf"{name}\s+ok\s", line), result.stdout


@pytest.mark.parametrize(
    ("capability", "check_says", "kernel_says"),
    [
        ("BPF", "missing CAP_BPF (create maps, load programs)", "Operation not permitted"),
        (
            "PERFMON",
            "missing CAP_PERFMON (load tracepoint programs, attach them with perf_event_open)",
            "Operation not permitted",
        ),
    ],
)
def test_without_each_capability_the_bpf_collectors_cannot_run(
    image: str, capability: str, check_says: str, kernel_says: str
) -> None:
    options, flags = options_without(capability=capability)
    result = in_image(image, options, "check", *flags)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = collector_lines(result.stdout)
    for name in BPF_COLLECTORS:
        assert lines[name].startswith(f"{name}"), lines
        assert f"CANNOT RUN: {check_says} — fix: run as root, or add {capability} to securityContext" in lines[name]
        assert f"--cap-add={capability}" in lines[name]
    assert re.match(r"cgroup_cpu\s+ok\s", lines["cgroup_cpu"]), lines
    # Not only the agent's own check: the kernel refuses the program without it.
    direct = in_image(image, options, "-c", LOAD_DIRECTLY, entrypoint="python3")
    assert "REFUSED" in direct.stdout, direct.stdout + direct.stderr
    assert kernel_says in direct.stderr, direct.stderr


def test_under_the_runtime_default_seccomp_profile_check_names_the_profile(image: str) -> None:
    options, flags = options_without(seccomp_default=True)
    result = in_image(image, options, "check", *flags)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = collector_lines(result.stdout)
    for name in BPF_COLLECTORS:
        assert "CANNOT RUN: the kernel refused bpf() EPERM (Operation not permitted)" in lines[name], lines
        assert "a seccomp profile filters them — fix: run with seccompProfile: Unconfined" in lines[name], lines


def test_without_the_host_tracefs_mount_check_says_to_mount_it(image: str) -> None:
    options, flags = options_without(mount="/sys/kernel/tracing")
    result = in_image(image, options, "check", *flags)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "NOT MOUNTED" in result.stdout
    lines = collector_lines(result.stdout)
    for name in BPF_COLLECTORS:
        assert (
            "CANNOT RUN: tracefs is not mounted — fix: in a container, mount the host's /sys/kernel/tracing"
            in (lines[name])
        ), lines


def test_what_the_agent_reads_of_other_processes_needs_no_capability_and_perfmon_opens_their_environment(
    image: str,
) -> None:
    """comm, cgroup, stat and schedstat of another root process: readable with no capability at all, so neither
    SYS_PTRACE nor DAC_READ_SEARCH is needed for them. Its environment (ptrace read mode, what `diagnose` would read,
    allow-listed) is refused with none, and readable with CAP_PERFMON alone: the DaemonSet already grants that."""
    options, _ = options_without(capability="BPF")
    options.remove("--cap-add=PERFMON")
    # A process of this test's own, as root with every capability root has here.
    target = subprocess.Popen(["sleep", "300"], env={"SCHEDWATCH_TEST_MARK": "1"})
    try:
        script = (
            "import pathlib\n"
            f"proc = pathlib.Path('/proc/{target.pid}')\n"
            f"for name in ('comm', 'cgroup', 'stat', 'task/{target.pid}/schedstat'):\n"
            "    print(name, len((proc / name).read_bytes()) > 0)\n"
            "try:\n"
            "    print('mark' if b'SCHEDWATCH_TEST_MARK=1' in (proc / 'environ').read_bytes() else 'no mark')\n"
            "except PermissionError:\n"
            "    print('environ refused')\n"
        )
        none = in_image(image, options, "-c", script, entrypoint="python3")
        perfmon = in_image(image, [*options, "--cap-add=PERFMON"], "-c", script, entrypoint="python3")
    finally:
        target.kill()
        target.wait()
    readable = ["comm True", "cgroup True", "stat True", f"task/{target.pid}/schedstat True"]
    assert none.stdout.splitlines() == [*readable, "environ refused"], none.stdout + none.stderr
    assert perfmon.stdout.splitlines() == [*readable, "mark"], perfmon.stdout + perfmon.stderr
