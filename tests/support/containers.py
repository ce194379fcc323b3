"""Real container runtimes for the container tests: Podman (with its Docker-compatible API), Docker, containerd."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.workloads import build_lock

REPO = Path(__file__).resolve().parents[2]
IMAGE = "docker.io/library/debian:bookworm-slim"
RUN_DIR = Path("/run/schedwatch-test")
PAUSE_IMAGE = "localhost/schedwatch-pause:test"
# restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so the sandbox may not lower its OOM score.
CONTAINERD_CONFIG = """version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
"""


def wait_for_socket(path: Path, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Until something accepts connections on the unix socket *path*."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        with socket.socket(socket.AF_UNIX) as sock:
            try:
                sock.connect(str(path))
                return
            except OSError:
                time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {path}")


def podman_setup() -> None:
    """scripts/podman-setup.sh, by one test process at a time (on a fresh machine it installs packages and builds
    the base image)."""
    with build_lock("podman-setup"):
        subprocess.run([str(REPO / "scripts" / "podman-setup.sh")], check=True, capture_output=True)


class Podman:
    """Podman set up by scripts/podman-setup.sh, its API served on a socket of the test run's own."""

    def __init__(self) -> None:
        podman_setup()
        # Podman's usual API socket, so that the agent's defaults (and the DaemonSet's) find it.
        self.socket = Path("/run/podman/podman.sock")
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        self._service = subprocess.Popen(
            ["podman", "system", "service", "--time=0", f"unix://{self.socket}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_socket(self.socket, self._service)
        self.prefix = f"swtest-{uuid.uuid4().hex[:6]}"
        self.binaries = REPO / "tests" / ".build"

    def run(self, name: str, *command: str, options: tuple[str, ...] = ()) -> str:
        """Start a detached container with the test workloads mounted at /w; returns its id."""
        result = subprocess.run(
            [
                "podman",
                "run",
                "-d",
                "--name",
                f"{self.prefix}-{name}",
                "-v",
                f"{self.binaries}:/w:ro",
                *options,
                IMAGE,
                *command,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return result.stdout.strip()

    def inspect(self, container: str) -> dict[str, object]:
        result = subprocess.run(["podman", "inspect", container], check=True, capture_output=True, text=True)
        document: dict[str, object] = json.loads(result.stdout)[0]
        return document

    def remove(self, container: str) -> None:
        subprocess.run(["podman", "rm", "-f", "-t", "0", container], capture_output=True)

    def close(self) -> None:
        listing = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
        for name in listing.stdout.split():
            if name.startswith(self.prefix):
                self.remove(name)
        pods = subprocess.run(
            ["podman", "pod", "ps", "-q", "--filter", f"name={self.prefix}"], capture_output=True, text=True
        ).stdout.split()
        if pods:
            subprocess.run(["podman", "pod", "rm", "-f", "-t", "0", *pods], check=True, capture_output=True)
        self._service.send_signal(signal.SIGTERM)
        self._service.wait(10)


class Containerd:
    """A containerd daemon of the test run's own (own socket, root, state and config), driven with ctr and its CRI.

    The CRI plugin runs with a local pause image (no registry here) and host-network pods (no CNI needed).
    """

    def __init__(self, image_archive: Path, pause_archive: Path) -> None:
        if shutil.which("containerd") is None:
            raise RuntimeError("containerd is missing: scripts/podman-setup.sh installs it")
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        self.socket = RUN_DIR / "containerd.sock"
        self.socket.unlink(missing_ok=True)
        config = RUN_DIR / "containerd.toml"
        config.write_text(
            CONTAINERD_CONFIG.format(
                root="/var/lib/schedwatch-test-containerd",
                state=RUN_DIR / "containerd-state",
                socket=self.socket,
                pause=PAUSE_IMAGE,
            )
        )
        self._log = (RUN_DIR / "containerd.log").open("w")
        self._daemon = subprocess.Popen(["containerd", "--config", str(config)], stdout=self._log, stderr=self._log)
        wait_for_socket(self.socket, self._daemon)
        self.ctr("images", "import", str(image_archive))
        self.ctr("images", "import", str(pause_archive))
        self._tasks: list[str] = []

    def ctr(self, *args: str) -> str:
        result = subprocess.run(
            ["ctr", "--address", str(self.socket), "-n", "k8s.io", *args], check=True, capture_output=True, text=True
        )
        return result.stdout

    def run(self, container_id: str, labels: dict[str, str], *command: str) -> int:
        """A detached container with the test workloads mounted at /w; returns its init pid."""
        label_args = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
        self.ctr(
            "run",
            "-d",
            *label_args,
            "--mount",
            f"type=bind,src={REPO / 'tests' / '.build'},dst=/w,options=rbind:ro",
            IMAGE,
            container_id,
            *command,
        )
        self._tasks.append(container_id)
        for line in self.ctr("task", "ls").splitlines()[1:]:
            fields = line.split()
            if fields[0] == container_id:
                return int(fields[1])
        raise RuntimeError(f"task {container_id} did not start")

    def close(self) -> None:
        for container_id in self._tasks:
            with contextlib.suppress(subprocess.CalledProcessError):
                self.ctr("task", "kill", "-s", "SIGKILL", container_id)
            time.sleep(0.2)
            with contextlib.suppress(subprocess.CalledProcessError):
                self.ctr("task", "delete", "-f", container_id)
            with contextlib.suppress(subprocess.CalledProcessError):
                self.ctr("containers", "delete", container_id)
        self._daemon.send_signal(signal.SIGTERM)
        self._daemon.wait(10)
        self._log.close()


class Docker:
    """A Docker daemon of the test run's own (Debian's docker.io: own socket, data root; no network set-up)."""

    def __init__(self, image_archive: Path) -> None:
        if shutil.which("dockerd") is None:
            raise RuntimeError("dockerd is missing: scripts/podman-setup.sh installs docker.io")
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        self.socket = RUN_DIR / "docker.sock"
        self.socket.unlink(missing_ok=True)
        self._log = (RUN_DIR / "dockerd.log").open("w")
        self._daemon = subprocess.Popen(
            [
                "dockerd",
                "--host",
                f"unix://{self.socket}",
                "--data-root",
                "/var/lib/schedwatch-test-docker",
                "--exec-root",
                str(RUN_DIR / "docker-exec"),
                "--pidfile",
                str(RUN_DIR / "docker.pid"),
                "--iptables=false",
                "--ip6tables=false",
                "--bridge=none",
            ],
            stdout=self._log,
            stderr=self._log,
        )
        wait_for_socket(self.socket, self._daemon)
        self.docker("load", "-i", str(image_archive))
        self.prefix = f"swtest-{uuid.uuid4().hex[:6]}"
        self._containers: list[str] = []

    def docker(self, *args: str) -> str:
        result = subprocess.run(
            ["/usr/bin/docker", "-H", f"unix://{self.socket}", *args], check=True, capture_output=True, text=True
        )
        return result.stdout.strip()

    def run(self, name: str, labels: dict[str, str], *command: str) -> str:
        """A detached container with the test workloads mounted at /w; returns its id."""
        label_args = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
        container = self.docker(
            "run",
            "-d",
            "--network",
            "none",
            "--ulimit",
            "nofile=20000:20000",  # root here may not raise limits (no CAP_SYS_RESOURCE)
            "--name",
            f"{self.prefix}-{name}",
            *label_args,
            "-v",
            f"{REPO / 'tests' / '.build'}:/w:ro",
            IMAGE,
            *command,
        )
        self._containers.append(container)
        return container

    def close(self) -> None:
        if self._containers:
            subprocess.run(
                ["/usr/bin/docker", "-H", f"unix://{self.socket}", "rm", "-f", *self._containers], capture_output=True
            )
        self._daemon.send_signal(signal.SIGTERM)
        self._daemon.wait(30)
        self._log.close()


def export_image(path: Path, image: str = IMAGE) -> Path:
    """A Podman image as a docker-archive, for ctr to import."""
    if not path.exists():
        subprocess.run(
            ["podman", "save", "--format", "docker-archive", "-o", str(path), image], check=True, capture_output=True
        )
    return path


def build_pause_image(path: Path) -> Path:
    """A pod sandbox image (the base image, sleeping forever) as a docker-archive: the kubelet's pause stand-in."""
    subprocess.run(
        ["podman", "build", "--pull=never", "-t", PAUSE_IMAGE, "-f", "-", str(REPO / "tests" / "workloads")],
        input=f'FROM {IMAGE}\nCMD ["sleep", "infinity"]\n',
        text=True,
        check=True,
        capture_output=True,
    )
    path.unlink(missing_ok=True)
    return export_image(path, PAUSE_IMAGE)


def silent_socket(path: Path) -> socket.socket:
    """A unix socket that accepts connections and never answers: a runtime that hangs."""
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(64)
    return server


def container_pid(podman: Podman, container: str) -> int:
    state = podman.inspect(container)["State"]
    assert isinstance(state, dict)
    return int(state["Pid"])


def cgroup_v2_path(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    raise RuntimeError(f"pid {pid} has no cgroup2 line")


def random_container_id() -> str:
    return os.urandom(32).hex()


# One tag per checkout: two work trees on one machine testing at once must not run each other's image.
AGENT_TEST_IMAGE = f"localhost/schedwatch:test-{hashlib.sha256(str(REPO).encode()).hexdigest()[:8]}"


def build_agent_image(tag: str = AGENT_TEST_IMAGE) -> str:
    """Build the Dockerfile with scripts/build-image.sh (Podman, base image from debootstrap); layers are cached."""
    result = subprocess.run([str(REPO / "scripts" / "build-image.sh"), tag], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"podman build failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return tag


def daemonset_run_options(daemonset: dict[str, Any]) -> tuple[list[str], list[str]]:
    """`podman run` options that give a container exactly the DaemonSet's privileges and mounts, and its args."""
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    security = container["securityContext"]
    options = ["--pid=host" if pod.get("hostPID") else "--pid=private", "--user", str(security.get("runAsUser", 0))]
    if security.get("privileged"):
        options.append("--privileged")
    options += [f"--cap-drop={c}" for c in security["capabilities"].get("drop", [])]
    options += [f"--cap-add={c}" for c in security["capabilities"].get("add", [])]
    if security.get("seccompProfile", {}).get("type") == "Unconfined":
        options += ["--security-opt", "seccomp=unconfined"]
    if security.get("readOnlyRootFilesystem"):
        options.append("--read-only")
    if security.get("allowPrivilegeEscalation") is False:
        options += ["--security-opt", "no-new-privileges"]
    options += [f"--env={variable['name']}={variable['value']}" for variable in container.get("env", [])]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "hostPath" in volume:
            mode = "ro" if mount.get("readOnly") else "rw"
            if volume["hostPath"].get("type") == "DirectoryOrCreate":  # as the kubelet does
                Path(volume["hostPath"]["path"]).mkdir(parents=True, exist_ok=True)
            options += ["-v", f"{volume['hostPath']['path']}:{mount['mountPath']}:{mode}"]
        elif "emptyDir" in volume:
            options += ["--tmpfs", mount["mountPath"]]
    return options, list(container["args"])
