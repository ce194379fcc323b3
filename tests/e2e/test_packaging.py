"""A plain `pip install .` outside the checkout carries the BPF sources and the console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.agent import REPO


def test_installed_package_finds_its_bpf_sources(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(REPO),
        ],
        check=True,
        cwd=tmp_path,
    )
    assert (target / "bin" / "schedwatch").is_file()
    probe = (
        "import agent, agent.bpf as b; d = b.source_dir(); "
        "print(agent.__file__); print(d); print(sorted(p.name for p in d.iterdir()))"
    )
    # Run from elsewhere with only the installed copy first on the path.
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    module_file, sources, names = result.stdout.splitlines()
    assert module_file.startswith(str(target))
    assert sources.startswith(str(target))
    assert "'syscalls.bpf.c'" in names and "'schedwatch.h'" in names
