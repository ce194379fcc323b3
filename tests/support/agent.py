"""Run the real agent (`python -m agent run`) as a subprocess and talk to it over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.scrape import Scrape, scrape

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AgentProcess:
    """`schedwatch run` on 127.0.0.1 with the given flags; logs go to a file."""

    def __init__(
        self, log_path: Path, *flags: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.log_path = log_path
        self._log = log_path.open("w")
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
        return agent

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until /metrics answers; raise with the agent's log if it dies or never answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"agent exited with {self.process.returncode}:\n{self.log()}")
            try:
                scrape(self.url, timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"agent did not serve {self.url} within {timeout}s:\n{self.log()}")

    def scrape(self) -> Scrape:
        """One scrape of the live agent."""
        return scrape(self.url)

    def log(self) -> str:
        """Everything the agent logged so far."""
        self._log.flush()
        return self.log_path.read_text()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait, and return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


def require_root() -> None:
    """Kernel tests need root; say so loudly instead of skipping."""
    if os.geteuid() != 0:
        raise RuntimeError("kernel tests need root and a BPF-capable kernel: run `sudo make test`")
