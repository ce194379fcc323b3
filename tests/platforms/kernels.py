"""Debian's packaged kernels for the platform tier: the newest of a series and flavour in the archive, its image,
modules and matching headers unpacked into a cache directory (apt-get download + dpkg-deb -x), never installed.

The cache (``SCHEDWATCH_KERNEL_CACHE``, default /var/cache/schedwatch/kernels) holds one tree per kernel release,
laid out as a root filesystem (boot/, lib/modules/RELEASE/, usr/src/linux-headers-*); virtme-ng finds the modules
beside the image, and the guest links /lib/modules/RELEASE to the tree, whose build and source links lead to the
exact headers for bcc.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("SCHEDWATCH_KERNEL_CACHE", "/var/cache/schedwatch/kernels"))
COMPLETE = ".complete"


class KernelUnavailable(RuntimeError):
    """The archive has no such kernel, or apt could not fetch it; the message says what to do."""


@dataclass(frozen=True)
class DebianKernel:
    """A kernel release unpacked in the cache."""

    release: str  # uname -r in the guest, e.g. 6.1.0-57-amd64
    root: Path  # the unpacked tree

    @property
    def image(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"

    @property
    def modules(self) -> Path:
        return self.root / "lib" / "modules" / self.release


def newest_release(series: str, flavour: str) -> str:
    """The newest ``linux-image-*`` release of *series* ('6.1', '6.12') and *flavour* ('amd64', 'rt-amd64') that
    the configured archive offers (CI's archive may hold newer ABIs than this machine's, so none is hard-coded)."""
    listed = subprocess.run(["apt-cache", "pkgnames", "linux-image-"], capture_output=True, text=True, check=False)
    pattern = re.compile(rf"linux-image-({re.escape(series)}\.[\d.]*[-+][\w.+]*?-{re.escape(flavour)})$")
    releases = [match.group(1) for name in listed.stdout.split() if (match := pattern.match(name))]
    if not releases:
        raise KernelUnavailable(
            f"the archive lists no linux-image-{series}*-{flavour}: run `apt-get update` (Debian 12's archive has "
            f"6.1 and 6.12)"
        )
    return max(releases, key=_version_key)


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(number) for number in re.findall(r"\d+", release))


def fetch(release: str, cache: Path = CACHE) -> DebianKernel:
    """The kernel *release* unpacked in *cache*, downloaded and unpacked first if it is not there yet."""
    kernel = DebianKernel(release, cache / release)
    if (kernel.root / COMPLETE).exists():
        return kernel
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / ".lock"):
        if (kernel.root / COMPLETE).exists():
            return kernel  # another run unpacked it while this one waited
        with tempfile.TemporaryDirectory(dir=cache, prefix=f".{release}-") as work:
            downloads, tree = Path(work, "debs"), Path(work, "tree")
            downloads.mkdir()
            packages = _packages_of(release)
            done = subprocess.run(
                ["apt-get", "download", "-q", *packages], cwd=downloads, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise KernelUnavailable(f"apt-get download {' '.join(packages)} failed: {done.stderr.strip()}")
            for deb in sorted(downloads.glob("*.deb")):
                subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
            _relink_headers(tree, release)
            depmod = shutil.which("depmod") or "/sbin/depmod"
            subprocess.run([depmod, "-a", "-b", str(tree), release], check=True)
            (tree / COMPLETE).write_text(" ".join(packages) + "\n")
            if kernel.root.exists():
                shutil.rmtree(kernel.root)  # an incomplete tree of an interrupted run
            tree.rename(kernel.root)
    return kernel


def _packages_of(release: str) -> list[str]:
    """The image and headers of *release*, and the common headers and kbuild tree its headers depend on."""
    packages = [f"linux-image-{release}", f"linux-headers-{release}"]
    shown = subprocess.run(
        ["apt-cache", "depends", "--no-recommends", "--no-suggests", f"linux-headers-{release}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:
        raise KernelUnavailable(f"the archive has no linux-headers-{release}: run `apt-get update`")
    for line in shown.stdout.splitlines():
        match = re.match(r"\s*\|?Depends: (linux-(?:headers-\S+-common\S*|kbuild-\S+))$", line)
        if match:
            packages.append(match.group(1))
    return packages


def _relink_headers(tree: Path, release: str) -> None:
    """lib/modules/RELEASE/{build,source} point at /usr/src/... of an installed system: point them into *tree*."""
    modules = tree / "lib" / "modules" / release
    for name in ("build", "source"):
        link = modules / name
        if link.is_symlink() and os.readlink(link).startswith("/"):
            target = tree / os.readlink(link).lstrip("/")
            link.unlink()
            if target.exists():
                link.symlink_to(os.path.relpath(target, modules))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
