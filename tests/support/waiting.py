"""Waiting for a server a test started."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path


def wait_for_http(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """Until *url* answers; fail with the server's log if it exits or never answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args!r} exited with {process.returncode}:\n{log.read_text()}") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout}s:\n{log.read_text()}") from None
            time.sleep(0.3)
