"""Boot a Debian kernel under QEMU with this machine's files shared in (virtme-ng) and run the guest side there.

The guest sees the host's root filesystem copy-on-write: this machine's Python, bcc and the project's venv, with the
checkout writable only inside the guest (--overlay-rwdir); the results directory is shared read-write. KVM is used
when /dev/kvm boots a guest; otherwise (no /dev/kvm, or nested KVM that hangs at boot, as under Firecracker) QEMU
emulates the CPU (TCG): ~10 s to boot, and bcc compiles each program some 30 times slower than natively.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.platforms.kernels import CACHE, DebianKernel

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: vng, and virtme-run that vng starts
KVM_PROBE_SECONDS = 60.0
CPUS = 2  # as this machine: the tests' pools and CPU limits are sized for 2 CPUs
MEMORY = "3G"


class VmFailed(RuntimeError):
    """The VM did not boot or did not run the guest side to its end; the message holds the console's tail."""


@dataclass(frozen=True)
class VmRun:
    """A finished guest: pytest's exit code (from the guest's own file), how long it took, and the accelerator."""

    exit_code: int
    seconds: float
    accelerator: str
    console: Path


def accelerator() -> str:
    """'kvm' when a guest boots with it here, else 'tcg'; SCHEDWATCH_VM_ACCEL forces one. The answer is kept per
    host kernel in the kernel cache, so that a host where KVM hangs pays the probe once."""
    forced = os.environ.get("SCHEDWATCH_VM_ACCEL")
    if forced:
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    remembered = CACHE / f"accelerator-{os.uname().release}"
    if remembered.exists():
        return remembered.read_text().strip()
    kernels = sorted(path for path in CACHE.glob("*/.complete"))
    if not kernels:
        return "tcg"  # nothing to probe with yet: the first fetch comes before the first boot
    root = kernels[0].parent
    image = next((root / "boot").glob("vmlinuz-*"))
    try:
        done = subprocess.run(
            [*_vng(image, "kvm"), "--exec", "true"],
            capture_output=True,
            timeout=KVM_PROBE_SECONDS,
            env=_environment(),
            check=False,
        )
        answer = "kvm" if done.returncode == 0 else "tcg"
    except subprocess.TimeoutExpired:
        answer = "tcg"
    remembered.write_text(answer + "\n")
    return answer


def run_guest(kernel: DebianKernel, layout: str, pytest_args: list[str], results: Path, timeout: float) -> VmRun:
    """Boot *kernel*, lay out the cgroups as *layout* ('v2' or 'v1') and run pytest with *pytest_args* in the guest;
    its files land in *results*."""
    results.mkdir(parents=True, exist_ok=True)
    for stale in ("exit_code", "junit.xml", "machine.json", "pytest.log"):
        (results / stale).unlink(missing_ok=True)
    accel = accelerator()
    guest = [
        sys.executable,
        "-m",
        "tests.platforms.guest",
        "--layout",
        layout,
        "--modules",
        str(kernel.modules),
        "--results",
        str(results),
        "--",
        *pytest_args,
    ]
    # The guest starts with an environment of its own: what the tests need from this one is passed on the command.
    slowdown = "1" if accel == "kvm" else os.environ.get("SCHEDWATCH_TCG_SLOWDOWN", "40")
    passed = [f"SCHEDWATCH_TEST_SLOWDOWN={slowdown}", "PYTHONDONTWRITEBYTECODE=1"]
    command = f"cd {shlex.quote(str(REPO))} && env {shlex.join([*passed, *guest])}"
    environment = _environment()
    console = results / "console.log"
    started = time.monotonic()
    with console.open("w") as output:
        try:
            subprocess.run(
                [
                    *_vng(kernel.image, accel),
                    "--rwdir",
                    str(results),
                    "--overlay-rwdir",
                    str(REPO),
                    "--exec",
                    command,
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                env=environment,
                cwd=REPO,
                check=False,
            )
        except subprocess.TimeoutExpired as timed_out:
            raise VmFailed(
                f"{kernel.release} ({layout}) did not finish within {timeout:.0f} s:\n{_tail(console)}"
            ) from (timed_out)
    seconds = time.monotonic() - started
    exit_file = results / "exit_code"
    if not exit_file.exists():
        raise VmFailed(f"{kernel.release} ({layout}): the guest side never finished:\n{_tail(console)}")
    return VmRun(int(exit_file.read_text()), seconds, accel, console)


def _vng(image: Path, accel: str) -> list[str]:
    command = [str(BIN / "vng"), "--run", str(image), "--cpus", str(CPUS), "--memory", MEMORY, "--name", "schedwatch"]
    if accel != "kvm":
        command.append("--disable-kvm")
    return command


def _environment() -> dict[str, str]:
    """The host's environment with the venv's bin and the sbin directories first (virtme-run, depmod)."""
    environment = dict(os.environ)
    environment["PATH"] = os.pathsep.join([str(BIN), "/usr/sbin", "/sbin", environment.get("PATH", "/usr/bin:/bin")])
    environment["PYTHONDONTWRITEBYTECODE"] = "1"
    return environment


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no console)"
