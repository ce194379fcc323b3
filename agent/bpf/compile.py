"""Compile and attach a BPF program with bcc: only ever in the loader child (:mod:`agent.bpf.loader`)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from agent.bpf import BpfUnavailable

SHARED_HEADER = "schedwatch.h"


def source_dir() -> Path:
    """Directory of the installed BPF C sources (``bpf/`` of the checkout, ``agent/bpf/programs`` when installed)."""
    return Path(str(resources.files("agent.bpf.programs")))


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
