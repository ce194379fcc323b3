"""Load a BPF program in a short-lived child and keep only its kernel objects, as fds of this process.

The child (:mod:`agent.bpf.loader`) imports bcc, compiles, loads and attaches; this side receives the
maps, programs and attachments over a Unix socket and never imports bcc. Closing the fds detaches the programs and
frees the maps.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import agent
from agent.bpf import BpfUnavailable
from agent.bpf.compile import PerfEventAttachment
from agent.bpf.maps import BpfMap, MapSpec

MAX_MESSAGE = 1 << 20
MAX_FDS = 253  # SCM_MAX_FD: the most one message may carry


@dataclass
class LoadedProgram:
    """What a loaded BPF program is made of, held as fds: maps by name, programs by function name, attachments."""

    maps: dict[str, BpfMap]
    programs: dict[str, int]
    attachments: list[int] = field(default_factory=list)
    loader_pid: int = 0

    def close(self) -> None:
        """Detach (attachments first, so no program runs on a closed map), then let go of programs and maps."""
        for fd in [*self.attachments, *self.programs.values()]:
            os.close(fd)
        self.attachments, self.programs = [], {}
        for bpf_map in self.maps.values():
            bpf_map.close()
        self.maps = {}


# The directory this agent package was imported from. The child imports the loader from there, first on its path:
# `python -m` would put the working directory first, and a checkout there would shadow an installed agent (whose
# BPF sources the checkout does not hold as agent.bpf.programs).
PACKAGE_ROOT = str(Path(agent.__file__).resolve().parent.parent)
LOADER_BOOTSTRAP = "\n".join(
    (
        "import sys",
        "sys.path.insert(0, sys.argv[1])",
        "from agent.bpf.loader import main",
        "raise SystemExit(main(sys.argv[2:]))",
    )
)


def load(
    source: str, defines: dict[str, str | int | None], perf_events: tuple[PerfEventAttachment, ...] = ()
) -> LoadedProgram:
    """Compile, load and attach bpf/*source* in a child process (and its functions to *perf_events*, opened on every
    online CPU); its objects, now held here.

    Raises BpfUnavailable, with the message the in-process load would have given, when the child cannot load it
    (the compiler's or verifier's output has gone to stderr, which the child shares).
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours:
        try:
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    LOADER_BOOTSTRAP,
                    PACKAGE_ROOT,
                    str(theirs.fileno()),
                    source,
                    json.dumps(defines),
                    json.dumps([asdict(event) for event in perf_events]),
                ],
                pass_fds=(theirs.fileno(),),
                env=dict(os.environ),  # BCC_KERNEL_SOURCE included
                stdin=subprocess.DEVNULL,
            )
        except OSError as error:
            raise BpfUnavailable(f"cannot start the BPF loader for {source}: {error}") from error
        finally:
            theirs.close()
        try:
            data, fds, flags, _ = socket.recv_fds(ours, MAX_MESSAGE, MAX_FDS)
        finally:
            status = child.wait()
    try:
        return _received(source, data, fds, flags, status, child.pid)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _received(source: str, data: bytes, fds: list[int], flags: int, status: int, pid: int) -> LoadedProgram:
    if not data:
        raise BpfUnavailable(
            f"cannot load {source}: the BPF loader exited with status {status} before handing the program over; "
            "its output is above"
        )
    message = json.loads(data)
    if not message["ok"]:
        raise BpfUnavailable(message["error"])
    if flags & socket.MSG_CTRUNC:
        raise BpfUnavailable(f"cannot load {source}: the kernel objects did not fit in one message")
    maps = {
        entry["name"]: BpfMap(fds[entry["fd"]], MapSpec(**{k: v for k, v in entry.items() if k != "fd"}))
        for entry in message["maps"]
    }
    programs = {entry["name"]: fds[entry["fd"]] for entry in message["programs"]}
    attachments = [fds[entry["fd"]] for entry in message["attachments"]]
    return LoadedProgram(maps, programs, attachments, pid)
