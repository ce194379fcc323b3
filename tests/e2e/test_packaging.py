"""A plain `pip install .` outside the checkout carries the BPF sources and the console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.agent import REPO, require_root


def installed(tmp_path: Path) -> Path:
    """A plain (not editable) `pip install --target` of a clean copy of the sources; the target directory."""
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
    return target


def test_installed_package_finds_its_bpf_sources(tmp_path: Path) -> None:
    target = installed(tmp_path)
    assert (target / "bin" / "schedwatch").is_file()
    probe = (
        "import agent, agent.bpf.compile as b, pkgutil, importlib, sys; d = b.source_dir(); "
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


def test_the_installed_agent_loads_its_programs_when_run_inside_a_checkout(tmp_path: Path) -> None:
    """The BPF loader child imports the package the agent was imported from, not a checkout in the working
    directory (`python -m` put the working directory first: every BPF collector fell back to perf mode)."""
    require_root()
    target = installed(tmp_path)
    # An interpreter that knows only the installed copy and the dependencies: no editable install of the checkout
    # (whose finder would answer for agent.bpf.programs and hide the bug).
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(fresh)], check=True)
    site_packages = next(p for p in sys.path if p.endswith("site-packages") and ".venv" in p)
    (next((fresh / "lib").glob("python3*")) / "site-packages" / "schedwatch-test.pth").write_text(
        f"{target}\n{site_packages}\n"
    )
    entry = tmp_path / "entry" / "schedwatch.py"  # run as a script: the script's directory is first, not the cwd
    entry.parent.mkdir()
    entry.write_text("import sys\nfrom agent.cli import main\nsys.exit(main())\n")
    result = subprocess.run(
        # syscall_families (off by default) turned on: every program the wheel ships is loaded
        [
            *(str(fresh / "bin" / "python"), str(entry), "check", "--format", "json"),
            *("--collector.syscall_families", "--state-dir", str(tmp_path / "s")),
        ],
        cwd=REPO,  # a checkout, whose agent/ has no agent/bpf/programs
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert report["mode"]["mode"] == "bpf", report["mode"]
    assert {name: check["ok"] for name, check in report["collectors"].items()} == {
        "syscalls": True,
        "sched": True,
        "syscall_families": True,
        "oncpu": True,
        "cgroup_cpu": True,
        "cgroup_memory": True,
        "pressure": True,
    }, report["collectors"]
    assert result.returncode == 0


def test_the_installed_copy_answers_the_readmes_seed_command_outside_the_checkout(tmp_path: Path) -> None:
    """The offline user's way in (README: `pip install .`, then the seed case's command): the installed copy alone,
    run from a directory outside the checkout as a plain process (no BPF is loaded for it), names the slow side, the
    cause and the fix with its number, as the README says."""
    target = installed(tmp_path)
    site_packages = next(p for p in sys.path if p.endswith("site-packages") and ".venv" in p)
    artifacts = REPO / "tests" / "unit" / "fixtures" / "artifacts"
    page = tmp_path / "seed.html"
    result = subprocess.run(
        [
            *(sys.executable, "-S", str(target / "bin" / "schedwatch"), "compare", "--cpus", "32", "--workers", "14"),
            *("--html", str(page), "--a", str(artifacts / "gcp_perf_trace_s.txt"), str(artifacts / "gcp_top.txt")),
            *("--b", str(artifacts / "baremetal_perf_trace_s.txt")),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{target}:{site_packages}", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("schedwatch compare: gcp vs baremetal\n"), result.stdout[:300]
    assert "gcp is the slow side" in result.stdout and "thread-pool-oversubscription" in result.stdout
    assert "OMP_NUM_THREADS=2" in result.stdout
    assert "-e OMP_NUM_THREADS=2" in page.read_text(encoding="utf-8")
