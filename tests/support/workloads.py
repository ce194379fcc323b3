"""Test workloads with exactly known behaviour (C programs in tests/workloads), and cgroups to run them in."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.machine.cgroups.layout import read_layout

SOURCES = Path(__file__).resolve().parents[1] / "workloads"
BUILD = Path(__file__).resolve().parents[1] / ".build"


@contextlib.contextmanager
def build_lock(what: str = "build") -> Iterator[None]:
    """Held while *what* is made (in tests/.build, or for the machine): the test processes of a parallel run share
    them, and one makes each while the others wait."""
    BUILD.mkdir(exist_ok=True)
    with (BUILD / f".{what}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(name: str, *extra_flags: str) -> Path:
    """Compile tests/workloads/<name>.c (if changed) and return the binary (written whole, then renamed into
    place: a binary another test process runs is never half-written)."""
    source = SOURCES / f"{name}.c"
    binary = BUILD / name
    newest = max(p.stat().st_mtime for p in SOURCES.glob("*.[ch]"))
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary
    with build_lock():
        if not binary.exists() or binary.stat().st_mtime < newest:
            compiler = shutil.which("gcc") or shutil.which("cc")
            if compiler is None:
                raise RuntimeError("no C compiler: apt-get install gcc")
            partial = binary.with_name(binary.name + ".partial")
            subprocess.run(
                [compiler, "-O2", "-Wall", "-Werror", "-pthread", "-o", str(partial), str(source), *extra_flags],
                check=True,
            )
            partial.rename(binary)
    return binary


class CgroupSandbox:
    """cgroup directories made for one test session, removed at the end: in cgroup2 (and v1 ones on hybrid hosts);
    on a host without cgroup2, in the v1 hierarchy the agent places processes by (``make_v1`` adds the same path in
    the others, as Docker's cgroupfs driver does)."""

    def __init__(self) -> None:
        layout = read_layout()
        if layout.workload_tree is None:
            raise RuntimeError("no cgroup hierarchy mounted: mount cgroup2 at /sys/fs/cgroup")
        self.root = layout.workload_tree
        self.v1 = {name: path for name, path in layout.v1.items() if path != self.root}
        self.name = f"schedwatch-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.base = self.root / self.name
        self.base.mkdir()
        self._v1_made: list[Path] = []

    def make_v1(self, controller: str, relative: str) -> Path:
        """A v1 cgroup of *controller* at *relative* (below the v1 root), e.g. to set a CPU quota on a hybrid host."""
        if controller not in self.v1:
            raise RuntimeError(f"no v1 {controller} hierarchy on this host")
        path = self.v1[controller] / relative.lstrip("/")
        path.mkdir(parents=True)
        self._v1_made.append(path)
        return path

    def make(self, name: str) -> Path:
        """A fresh, empty cgroup; its path relative to the cgroup2 root is ``relative(path)``."""
        path = self.base / f"{name}-{uuid.uuid4().hex[:6]}"
        path.mkdir()
        return path

    def relative(self, path: Path) -> str:
        """The path as the agent labels it."""
        return "/" + str(path.relative_to(self.root))

    def remove(self, path: Path, timeout: float = 5.0) -> None:
        """rmdir a cgroup once its processes are gone (exited processes linger briefly)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                path.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def cleanup(self) -> None:
        """Remove everything under the session's base cgroup."""
        for child in sorted(self.base.glob("*"), reverse=True):
            if child.is_dir():
                self._kill_members(child)
                self.remove(child)
        self.remove(self.base)
        for path in reversed(self._v1_made):
            self._kill_members(path)
            self.remove(path)
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # the session's v1 base, once empty

    @staticmethod
    def _kill_members(path: Path) -> None:
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)


class Workload:
    """A running workload: its ground truth (first JSON line it prints) and a handle to release it."""

    def __init__(self, binary: Path, *args: str | int | Path, hold: bool = True) -> None:
        self.process = subprocess.Popen(
            [str(binary), *(str(a) for a in args), "1" if hold else "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            raise RuntimeError(f"{binary.name} failed with {self.process.returncode}")
        self.truth: dict[str, Any] = json.loads(line)
        self.pid: int = self.truth["pid"]
        if not hold:
            self.process.wait()

    def release(self) -> int:
        """Let the workload exit and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=30)
