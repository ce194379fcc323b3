"""`check` says whether bcc imports, which version and from where, in a real virtual environment made without
--system-site-packages (the commonest install mistake): there the loader finds bcc in the distribution's packages,
and check says so; where bcc is nowhere (the distribution's packages hidden by a private tmpfs mount, as on a
machine without python3-bpfcc), check --no-load says BPF cannot run, marks each BPF collector and exits 1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import prometheus_client
import pytest

from tests.support.agent import REPO, require_root
from tests.support.schemas import assert_valid

DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")
HIDE_DIST_PACKAGES = (
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount -t tmpfs none "$0" && exec "$@"',
)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a venv made without --system-site-packages, with schedwatch and its dependencies (from this
    test's own environment) on its path, and nothing of the distribution's packages."""
    require_root()
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    dependencies = Path(prometheus_client.__file__).resolve().parents[1]
    assert dependencies != DIST_PACKAGES, "the dependencies must come from a venv, not the distribution's packages"
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "schedwatch.pth").write_text(f"{REPO}\n{dependencies}\n")
    python = venv / "bin" / "python"
    paths = subprocess.run([python, "-c", "import sys; print(sys.path)"], capture_output=True, text=True, check=True)
    assert str(DIST_PACKAGES) not in paths.stdout, paths.stdout
    return python


def check(python: Path, state: Path, *flags: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, str(python), "-m", "agent", "check", "--no-load", "--state-dir", str(state), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def installed_bcc_version() -> str:
    text = (DIST_PACKAGES / "bcc" / "version.py").read_text()
    found = re.search(r"__version__ = '([^']+)'", text)
    assert found, text
    return found.group(1)


def test_in_a_venv_without_system_packages_check_says_which_bcc_the_loader_finds(
    bare_python: Path, tmp_path: Path
) -> None:
    result = check(bare_python, tmp_path, "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert_valid(report)
    assert report["machine"]["bcc"] == {
        "version": installed_bcc_version(),
        "path": str(DIST_PACKAGES / "bcc"),
        "outside_path": True,
        "error": "",
    }
    assert report["collectors"]["syscalls"]["ok"] is True
    text = check(bare_python, tmp_path).stdout
    assert (
        f"  bcc          {installed_bcc_version()} from {DIST_PACKAGES / 'bcc'} (outside this Python's own path" in text
    )


def test_where_bcc_cannot_be_imported_check_no_load_says_bpf_cannot_run(bare_python: Path, tmp_path: Path) -> None:
    hidden = (*HIDE_DIST_PACKAGES, str(DIST_PACKAGES))
    result = check(bare_python, tmp_path, prefix=hidden)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    missing = (
        "bcc cannot be imported (No module named 'bcc'; looked in this Python's path and /usr/lib/python3/dist-packages"
    )
    assert any(line.startswith(f"  bcc          CANNOT BE IMPORTED: {missing}") for line in lines), result.stdout
    assert any(line.startswith(f"  mode         perf (--mode auto): BPF cannot run: {missing}") for line in lines)
    for name in ("syscalls", "sched", "oncpu"):  # the BPF collectors on by default (syscall_families is off)
        assert any(line.startswith(f"  {name:<16} CANNOT RUN: {missing}") for line in lines), (name, result.stdout)
    assert "can be loaded here" not in result.stdout
    report = json.loads(check(bare_python, tmp_path, "--format", "json", prefix=hidden).stdout)
    assert_valid(report)
    assert report["machine"]["bcc"]["version"] is None and report["ok"] is False
    assert report["degraded"]["syscalls"]["runs_as"] == "perf"
