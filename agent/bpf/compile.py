"""Compile and attach a BPF program with bcc: only ever in the loader child (:mod:`agent.bpf.loader`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from agent.bpf import BpfUnavailable
from agent.machine.kernel import version_tuple

SHARED_HEADER = "schedwatch.h"


def source_dir() -> Path:
    """Directory of the installed BPF C sources (``bpf/`` of the checkout, ``agent/bpf/programs`` when installed)."""
    return Path(str(resources.files("agent.bpf.programs")))


# Where Debian and Ubuntu (python3-bpfcc) and Fedora install bcc's module: looked in when this Python cannot
# import it by itself (a virtual environment made without --system-site-packages).
DISTRIBUTION_PATHS = ("/usr/lib/python3/dist-packages", "/usr/lib/python3/site-packages")
BCC_INSTALL_FIX = (
    "install bcc's Python module: apt-get install python3-bpfcc (Debian/Ubuntu; dnf install python3-bcc on Fedora)"
)
# The oldest bcc whose helpers.h declares every helper the programs call: bpf_task_pt_regs (syscalls.bpf.c) is
# in bcc's src/cc/export/helpers.h from its tag v0.22.0 on (not in v0.21.0's); the rest are older.
OLDEST_BCC = (0, 22, 0)
BCC_UPGRADE_FIX = (
    "install bcc 0.22.0 or later (Debian 12's python3-bpfcc is 0.26.0; older distributions: bcc built from source)"
)
# Test-only: extra defines for one program, by source file name, as JSON ({"sched.bpf.c": {"NAME": "VALUE"}}).
# The kernel tests set it to make the real verifier refuse one program (docs/modes.md); nothing else reads it.
TEST_DEFINES_VARIABLE = "SCHEDWATCH_TEST_BPF_DEFINES"


def program_text(directory: Path, source_name: str) -> str:
    """The program's source with bpf/schedwatch.h's text in place of its ``#include "schedwatch.h"`` line: bcc
    rewrites map operations only in the program's own text, and the header's process lifecycle uses the program's
    maps."""
    include = f'#include "{SHARED_HEADER}"'
    lines = (directory / source_name).read_text().splitlines()
    if include not in lines:
        return "\n".join(lines) + "\n"
    at = lines.index(include)
    header = (directory / SHARED_HEADER).read_text()
    # #line keeps the compiler's and the verifier's line numbers those of the two files.
    spliced = [f'#line 1 "{SHARED_HEADER}"', header, f'#line {at + 2} "{source_name}"']
    return "\n".join(lines[:at] + spliced + lines[at + 1 :]) + "\n"


def import_bcc() -> Any:
    """Import bcc's Python module, looking in the distribution's dist-packages if needed; one older than the programs
    need is refused as one that does not import."""
    bcc = _imported_bcc()
    too_old = bcc_too_old(_bcc_version())
    if too_old:
        raise BpfUnavailable(too_old, fix=BCC_UPGRADE_FIX)
    return bcc


def bcc_too_old(version: str) -> str:
    """Why bcc *version* cannot build the programs (older than :data:`OLDEST_BCC`), or "" when it can or its version
    is not known (then the compiler has the last word)."""
    number = version_tuple(version)
    if not number or number >= OLDEST_BCC:
        return ""
    oldest = ".".join(map(str, OLDEST_BCC))
    return f"bcc {version} is too old: the programs call helpers that bcc declares from {oldest} on (bpf_task_pt_regs)"


def _bcc_version() -> str:
    try:
        from bcc import version

        return str(version.__version__)
    except (ImportError, AttributeError):
        return "unknown"


def _imported_bcc() -> Any:
    try:
        import bcc
    except ImportError:
        import sys

        for extra in DISTRIBUTION_PATHS:
            if Path(extra, "bcc").is_dir() and extra not in sys.path:
                sys.path.append(extra)
        try:
            import bcc
        except ImportError as error:
            looked = " and ".join(DISTRIBUTION_PATHS)
            raise BpfUnavailable(
                f"bcc cannot be imported ({error}; looked in this Python's path and {looked})", fix=BCC_INSTALL_FIX
            ) from error
    return bcc


def bcc_origin() -> dict[str, Any]:
    """Whether bcc imports in this process as :func:`import_bcc` imports it, its version, where from, and whether it is
    too old for the programs (run in a child: the agent itself never imports bcc)."""
    import sys

    own_path = list(sys.path)
    try:
        bcc = _imported_bcc()
    except BpfUnavailable as error:
        return {"version": None, "error": str(error)}
    except Exception as error:  # bcc's own import code fails in its own ways (a missing libbcc.so)
        return {"version": None, "error": f"bcc cannot be imported: {error}"}
    directory = Path(bcc.__file__).parent
    number = _bcc_version()
    return {
        "version": number,
        "path": str(directory),
        "outside_path": str(directory.parent) not in own_path,
        "error": bcc_too_old(number),
    }


@dataclass(frozen=True)
class PerfEventAttachment:
    """A function of the program to run on a perf event opened on every online CPU (bcc's attach_perf_event)."""

    function: str
    event_type: int  # PERF_TYPE_SOFTWARE = 1
    event_config: int  # PERF_COUNT_SW_CPU_CLOCK = 0
    frequency: int  # samples per second per CPU


def compile_program(
    source_name: str, defines: dict[str, str | int | None], perf_events: tuple[PerfEventAttachment, ...] = ()
) -> Any:
    """Compile and load ``bpf/<source_name>`` with bcc; tracepoint probes attach automatically, *perf_events* are
    opened and attached here."""
    bcc = import_bcc()
    directory = source_dir()
    cflags = [f"-I{directory}", "-Wno-unused-function"]
    defines = {**defines, **json.loads(os.environ.get(TEST_DEFINES_VARIABLE) or "{}").get(source_name, {})}
    for name, value in sorted(defines.items()):
        cflags.append(f"-D{name}" if value is None else f"-D{name}={value}")
    try:
        program = bcc.BPF(text=program_text(directory, source_name).encode(), cflags=cflags)
    except Exception as error:  # bcc raises bare Exception on compile and attach failures
        raise BpfUnavailable(
            f"cannot load {source_name}: {error}; the compiler's or verifier's output is above, and "
            "`schedwatch check` shows which kernel headers were used (set BCC_KERNEL_SOURCE to try others)"
        ) from error
    for event in perf_events:
        try:
            program.attach_perf_event(
                ev_type=event.event_type,
                ev_config=event.event_config,
                fn_name=event.function.encode(),
                sample_freq=event.frequency,
            )
        except Exception as error:  # bcc raises bare Exception when perf_event_open or the attach fails
            raise BpfUnavailable(
                f"cannot open the perf event (type {event.event_type}, config {event.event_config}) for "
                f"{source_name}: {error}; perf_event_open(2) needs CAP_PERFMON (or CAP_SYS_ADMIN) and a kernel with "
                "CONFIG_PERF_EVENTS"
            ) from error
    return program
