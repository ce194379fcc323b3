"""Run the real agent (`python -m agent run`) as a subprocess and talk to it over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.scrape import Scrape, scrape
from tests.support.slowdown import slowdown

REPO = Path(__file__).resolve().parents[2]
PORT_TAKEN = "cannot listen on 127.0.0.1:{port}: Address already in use"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AgentProcess:
    """`schedwatch run` on 127.0.0.1 with the given flags; logs go to a file."""

    def __init__(
        self,
        log_path: Path,
        *flags: str,
        env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (),
        port: int | None = None,
    ) -> None:
        self.log_path = log_path
        self._log = log_path.open("w")
        self._chosen_port = port is None
        self._start = (flags, env, prefix)
        self._listen(free_port() if port is None else port)

    def _listen(self, port: int) -> None:
        """Start the agent on *port*."""
        flags, env, prefix = self._start
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        command = [
            *prefix,
            sys.executable,
            "-m",
            "agent",
            "run",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--log-format",
            "json",
            # A scrape that a loaded machine makes slow is no test's subject (test_web sets its own timeout): the
            # default 10 s cut the session agent's answers at load 25 (RemoteDisconnected).
            *(() if any(flag.startswith("--web.timeout") for flag in flags) else slow_machine_flags()),
            *flags,
        ]
        self.process = subprocess.Popen(command, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    @classmethod
    def attach(cls, port: int, process: subprocess.Popen[bytes], log_path: Path) -> AgentProcess:
        """An agent started some other way (e.g. in a container) whose liveness *process* reflects."""
        agent = cls.__new__(cls)
        agent.port, agent.url, agent.process, agent.log_path = (
            port,
            f"http://127.0.0.1:{port}/metrics",
            process,
            log_path,
        )
        agent._log = log_path.open("a")
        agent._chosen_port = False
        return agent

    def wait_ready(self, timeout: float = 240.0) -> None:
        """Block until /metrics answers; if it dies or never answers, stop it and raise with its log. The agent
        compiles each program first: 20 s for one on this 2-CPU machine when others' VMs and tests load it."""
        timeout *= slowdown()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if self._chosen_port and PORT_TAKEN.format(port=self.port) in self.log():
                    # Something else (another test process) took the free port before the agent bound it.
                    self._listen(free_port())
                    continue
                raise RuntimeError(f"agent exited with {self.process.returncode}:\n{self.log()}")
            try:
                scrape(self.url, timeout=30)
                return
            except OSError:
                time.sleep(0.2)
        log = self.log()
        self.stop()
        raise RuntimeError(f"agent did not serve {self.url} within {timeout}s:\n{log}")

    def scrape(self) -> Scrape:
        """One scrape of the live agent."""
        return scrape(self.url)

    def log(self) -> str:
        """Everything the agent logged so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait, and return the exit code."""
        timeout *= slowdown()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


def slow_machine_flags() -> list[str]:
    """A web timeout for test agents longer than the default 10 s: 120 s, the longest allowed (300 s) on an emulated
    machine (slowdown > 1), where a scrape takes longer still."""
    return ["--web.timeout", "300" if slowdown() > 1 else "120"]


def kubelet_docker_agent(work: Path, docker_socket: Path, *extra: str) -> AgentProcess:
    """An agent whose only runtime is a Docker API named as the kubelet's own (cri-dockerd), so that its
    io.kubernetes.* labels are trusted as pod and namespace, with *extra* flags; not yet ready (call wait_ready)."""
    return AgentProcess(
        work / "agent.log",
        "--runtime.docker-sockets",
        "",
        "--runtime.kubelet-docker-sockets",
        str(docker_socket),
        "--runtime.cri-sockets",
        "",
        "--runtime.containerd-socket",
        "",
        "--state-dir",
        str(work),
        *extra,
    )


def only_collectors(*names: str) -> list[str]:
    """The flags that leave an agent running the collectors *names* (those off by default turned on) and no other
    registered one."""
    from agent.collectors import registry

    known = registry()
    assert set(names) <= set(known), f"no such collectors: {set(names) - set(known)}"
    return [f"--collector.{name}" if name in names else f"--no-collector.{name}" for name in known]


def require_root() -> None:
    """Kernel tests need root; say so loudly instead of skipping."""
    if os.geteuid() != 0:
        raise RuntimeError("kernel tests need root and a BPF-capable kernel: run `sudo make test`")


def agent_map_keys(agent: AgentProcess, name: str) -> list[int]:
    """Keys of the agent's BPF maps called *name* (one per program that has one), read by bpftool."""
    return [_map_key(entry) for entry in _map_dump(agent, name)]


def agent_slot_holders(agent: AgentProcess, name: str) -> list[int]:
    """The thread ids holding a slot of the agent's BPF arrays called *name*: each value's first field (a u64 `tid`,
    0 for a free slot), read by bpftool."""
    holders = []
    for entry in _map_dump(agent, name):
        value = entry["value"]
        if isinstance(value, list):
            tid = int.from_bytes(bytes(int(str(b), 16) for b in value[:8]), "little")
        else:
            assert isinstance(value, dict), value
            tid = int(str(value["tid"]))
        if tid:
            holders.append(tid)
    return holders


def _map_dump(agent: AgentProcess, name: str) -> list[dict[str, object]]:
    """Every entry of the agent's BPF maps called *name*, as bpftool dumps them in JSON."""
    bpftool = shutil.which("bpftool")
    assert bpftool, "bpftool is missing: apt-get install bpftool"
    entries: list[dict[str, object]] = []
    found = False
    for fdinfo in Path(f"/proc/{agent.process.pid}/fdinfo").iterdir():
        try:
            text = fdinfo.read_text()
        except FileNotFoundError:
            continue  # a descriptor closed since the listing (a scrape's socket): not a map
        lines = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if "map_id" not in lines:
            continue
        map_id = lines["map_id"].strip()
        shown = json.loads(subprocess.run([bpftool, "-j", "map", "show", "id", map_id], capture_output=True).stdout)
        if shown.get("name") == name:
            dumped = subprocess.run([bpftool, "-j", "map", "dump", "id", map_id], capture_output=True, check=True)
            found = True
            entries += json.loads(dumped.stdout)
    assert found, f"the agent holds no map named {name}"
    return entries


def agent_map_entries(agent: AgentProcess, name: str) -> int:
    """Entries of the agent's BPF maps called *name*, counted by bpftool (not by the agent)."""
    return len(agent_map_keys(agent, name))


def _map_key(entry: dict[str, object]) -> int:
    """An integer key from bpftool's JSON: raw bytes (hex strings, little endian), or BTF-formatted."""
    key = entry["key"]
    if isinstance(key, list):
        return int.from_bytes(bytes(int(str(b), 16) for b in key), "little")
    return int(str(key))
