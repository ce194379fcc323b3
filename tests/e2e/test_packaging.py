"""A plain `pip install .` outside the checkout carries the BPF sources and the console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.agent import REPO


def test_installed_package_finds_its_bpf_sources(tmp_path: Path) -> None:
    # A clean copy of the sources, so that no stale build/ directory can hide a missing package.
    source = tmp_path / "src"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            "build", ".venv", ".git", "*.egg-info", "tests", "bench", "__pycache__", ".mypy_cache", ".ruff_cache"
        ),
    )
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
            str(source),
        ],
        check=True,
        cwd=tmp_path,
    )
    assert (target / "bin" / "schedwatch").is_file()
    probe = (
        "import agent, agent.bpf as b, pkgutil, importlib, sys; d = b.source_dir(); "
        "mods = [importlib.import_module(m.name) for m in pkgutil.walk_packages(agent.__path__, 'agent.') "
        "if not m.name.endswith('__main__')]; "
        f"assert all(m.__file__.startswith({str(target)!r}) for m in mods), [m.__file__ for m in mods]; "
        "print(agent.__file__); print(d); print(sorted(p.name for p in d.iterdir()))"
    )
    # -S: no .pth files, so the checkout's editable install cannot answer for a module the wheel lacks.
    site_packages = next(p for p in sys.path if p.endswith("site-packages") and ".venv" in p)
    # Run from elsewhere with the installed copy first on the path; every module must import from it.
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{target}:{site_packages}", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    module_file, sources, names = result.stdout.splitlines()
    assert module_file.startswith(str(target))
    assert sources.startswith(str(target))
    assert "'syscalls.bpf.c'" in names and "'schedwatch.h'" in names
