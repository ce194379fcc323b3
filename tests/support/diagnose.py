"""`schedwatch diagnose --json` as a subprocess: the test acts once the window has opened, then reads the JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import IO, Any

from tests.support.agent import REPO
from tests.support.schemas import assert_valid

HERE = (sys.executable, "-m", "agent")  # the agent of this checkout, run by this Python


class Diagnose:
    """One run of `diagnose --json --log-format json *flags*`, by *command* (e.g. ``podman exec NAME schedwatch``)."""

    def __init__(self, *flags: str, command: tuple[str, ...] = HERE) -> None:
        self.process = subprocess.Popen(
            [*command, "diagnose", "--json", "--log-format", "json", *flags],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        self.output = ""

    def wait_for_window(self, timeout: float = 90.0) -> float:
        """Block until the first reading is taken; the monotonic time then."""
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                raise AssertionError(f"diagnose exited before its window:\n{''.join(self.log)}{self._rest()}")
            self.log.append(line)
            if '"window_started"' in line:
                return time.monotonic()
        self.process.kill()
        raise AssertionError(f"no window within {timeout} s:\n{''.join(self.log)}")

    def result(self) -> dict[str, Any]:
        """The JSON it printed; fails with its log when it failed. Everything it wrote is kept in .output."""
        out, err = self.process.communicate(timeout=120)
        self.output = "".join(self.log) + err + out
        assert self.process.returncode == 0, f"diagnose exited {self.process.returncode}:\n{''.join(self.log)}{err}"
        document: dict[str, Any] = json.loads(out)
        assert_valid(document)
        return document

    def _rest(self) -> str:
        stream: IO[str] | None = self.process.stderr
        return stream.read() if stream is not None else ""
