"""An agent in a pid namespace of its own (`schedwatch run --sidecar` under `unshare --pid`), as a pod with
shareProcessNamespace gives its containers: it counts only what runs in that namespace, and workloads are started
inside it with nsenter."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

from tests.support.agent import AgentProcess

PREFIX = ("unshare", "--pid", "--fork", "--mount-proc")  # the agent is the namespace's first process


class Sidecar:
    """*agent*, started with ``--sidecar`` and :data:`PREFIX`, and the namespace it made."""

    def __init__(self, agent: AgentProcess) -> None:
        self.agent = agent
        children = Path(f"/proc/{agent.process.pid}/task/{agent.process.pid}/children").read_text().split()
        (self.pid,) = (int(child) for child in children)

    def command(self, binary: Path, *args: object) -> list[str]:
        """A command line running *binary* inside the namespace."""
        return ["nsenter", "--target", str(self.pid), "--pid", "--mount", "--", str(binary), *map(str, args)]

    def run(self, binary: Path, *args: object) -> dict[str, object]:
        """Run a workload inside the namespace to its end; its ground truth."""
        done = subprocess.run(self.command(binary, *args, 0), capture_output=True, text=True, check=True, timeout=60)
        truth: dict[str, object] = json.loads(done.stdout.splitlines()[0])
        return truth

    def hold(self, binary: Path, *args: object) -> tuple[subprocess.Popen[str], dict[str, object]]:
        """Start a workload inside the namespace that stays until its stdin closes; it and its ground truth."""
        held = subprocess.Popen(
            self.command(binary, *args, 1), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert held.stdout is not None
        truth: dict[str, object] = json.loads(held.stdout.readline())
        return held, truth

    def stop(self) -> int:
        """Stop the agent (SIGTERM to it inside the namespace); its exit status."""
        if self.agent.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
        return self.agent.stop()
