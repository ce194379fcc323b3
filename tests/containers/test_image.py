"""The agent image, built here with Podman, run with exactly the DaemonSet's capabilities and mounts."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.containers.test_identity import eventually, yielded
from tests.support.agent import AgentProcess, free_port
from tests.support.containers import Podman, build_agent_image, container_pid, daemonset_run_options

DAEMONSET = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "base" / "daemonset.yaml"
# The image's size budget (docs/benchmarks.md, "Agent image"): 246 MB measured, most of it LLVM and clang in libbcc.
SIZE_BUDGET_BYTES = 250_000_000


@pytest.fixture(scope="module")
def agent_container(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    image = build_agent_image()
    options, args = daemonset_run_options(yaml.safe_load(DAEMONSET.read_text()))
    port = free_port()
    # The DaemonSet listens on 0.0.0.0 in the pod's network; here the host's network stands in for it.
    args = [a if not a.startswith("--listen=") else f"--listen=127.0.0.1:{port}" for a in args]
    name = f"{podman.prefix}-agent"
    subprocess.run(
        ["podman", "run", "-d", "--name", name, "--network=host", *options, image, *args, "--series-grace=3"],
        check=True,
        capture_output=True,
        text=True,
    )
    logs = tmp_path_factory.mktemp("agent-image") / "agent.log"
    follower = subprocess.Popen(["podman", "logs", "-f", name], stdout=logs.open("w"), stderr=subprocess.STDOUT)
    agent = AgentProcess.attach(port, follower, logs)
    try:
        agent.wait_ready(timeout=90)
        yield agent
    finally:
        agent.process.terminate()
        subprocess.run(["podman", "stop", "-t", "10", name], capture_output=True)
        subprocess.run(["podman", "rm", "-f", name], capture_output=True)


# Capability numbers from linux/capability.h, of the capabilities a DaemonSet might add.
CAPABILITY_BITS = {
    "DAC_READ_SEARCH": 2,
    "SYS_PTRACE": 19,
    "SYS_ADMIN": 21,
    "SYS_RESOURCE": 24,
    "PERFMON": 38,
    "BPF": 39,
}


CAPTURE: dict[str, Any] = {"capture_output": True, "text": True, "check": True, "timeout": 120}


def effective_capabilities(pid: int) -> set[str]:
    status = Path(f"/proc/{pid}/status").read_text()
    capeff = int(re.search(r"^CapEff:\s+([0-9a-f]+)$", status, re.MULTILINE).group(1), 16)  # type: ignore[union-attr]
    unknown = capeff & ~sum(1 << bit for bit in CAPABILITY_BITS.values())
    assert unknown == 0, f"the agent has capabilities beyond the DaemonSet's: {unknown:#x}"
    return {name for name, bit in CAPABILITY_BITS.items() if capeff >> bit & 1}


def test_image_counts_a_yielding_container_by_id_and_name(agent_container: AgentProcess, podman: Podman) -> None:
    manifest = yaml.safe_load(DAEMONSET.read_text())["spec"]["template"]["spec"]["containers"][0]
    agent_pid = container_pid(podman, f"{podman.prefix}-agent")
    assert effective_capabilities(agent_pid) == set(manifest["securityContext"]["capabilities"]["add"])
    scrape = agent_container.scrape()
    for source in ("syscalls", "sched", "cgroup_cpu"):
        assert scrape.value("schedwatch_source_up", source=source) == 1, agent_container.log()
    container = podman.run("imaged", "sh", "-c", "/w/yielder - 30000 2 0; exec sleep 600")
    name = f"{podman.prefix}-imaged"
    eventually(agent_container, lambda s: yielded(s, 60_000, container_id=container, container=name))


@pytest.fixture(scope="module")
def image(podman: Podman) -> str:
    return build_agent_image()


def test_the_image_stays_within_its_size_budget(image: str) -> None:
    size = int(subprocess.run(["podman", "image", "inspect", image, "--format", "{{.Size}}"], **CAPTURE).stdout)
    assert size <= SIZE_BUDGET_BYTES, f"{image} is {size / 1e6:.0f} MB, over {SIZE_BUDGET_BYTES / 1e6:.0f} MB"


# What runs outside Python in the image: bcc unpacks /sys/kernel/kheaders.tar.xz with system("tar -xf ..."), which
# needs sh, tar and xz; ctypes.util.find_library asks ldconfig (agent/memory.py finds glibc's malloc that way).
OUTSIDE_PYTHON = """
import ctypes.util, pathlib, subprocess
print("libc", ctypes.util.find_library("c"))
unpack = "tar -cJf /tmp/probe.tar.xz -C /etc passwd && tar -xf /tmp/probe.tar.xz -C /tmp"
subprocess.run(["sh", "-c", unpack], check=True)
print("unpacked", pathlib.Path("/tmp/passwd").read_text() == pathlib.Path("/etc/passwd").read_text())
"""


def test_what_bcc_and_the_agent_run_outside_python_is_in_the_image(image: str) -> None:
    options = ["--rm", "--network=none", "--read-only", "--tmpfs", "/tmp", "--entrypoint", "python3"]
    result = subprocess.run(["podman", "run", *options, image, "-c", OUTSIDE_PYTHON], **CAPTURE)
    assert result.stdout.split("\n")[:2] == ["libc libc.so.6", "unpacked True"], result.stdout + result.stderr
