"""Compile and attach a BPF program with bcc: only ever in the loader child (:mod:`agent.bpf.loader`)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from agent.bpf import BpfUnavailable


def source_dir() -> Path:
    """Directory of the installed BPF C sources (``bpf/`` of the checkout, ``agent/bpf/programs`` when installed)."""
    return Path(str(resources.files("agent.bpf.programs")))


def import_bcc() -> Any:
    """Import bcc's Python module, looking in Debian's dist-packages if needed."""
    try:
        import bcc
    except ImportError:
        import sys

        for extra in ("/usr/lib/python3/dist-packages", "/usr/lib/python3/site-packages"):
            if Path(extra, "bcc").is_dir() and extra not in sys.path:
                sys.path.append(extra)
        try:
            import bcc
        except ImportError as error:
            raise BpfUnavailable("bcc is not installed: apt-get install python3-bpfcc (Debian/Ubuntu)") from error
    return bcc


def compile_program(source_name: str, defines: dict[str, str | int | None]) -> Any:
    """Compile and load ``bpf/<source_name>`` with bcc; tracepoint probes attach automatically."""
    bcc = import_bcc()
    directory = source_dir()
    cflags = [f"-I{directory}", "-Wno-unused-function"]
    for name, value in sorted(defines.items()):
        cflags.append(f"-D{name}" if value is None else f"-D{name}={value}")
    try:
        return bcc.BPF(src_file=str(directory / source_name).encode(), cflags=cflags)
    except Exception as error:  # bcc raises bare Exception on compile and attach failures
        raise BpfUnavailable(
            f"cannot load {source_name}: {error}; the compiler's or verifier's output is above, and "
            "`schedwatch check` shows which kernel headers were used (set BCC_KERNEL_SOURCE to try others)"
        ) from error
