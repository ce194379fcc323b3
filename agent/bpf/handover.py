"""Load a BPF program in a short-lived child and keep only its kernel objects, as fds of this process.

The child (:mod:`agent.bpf.loader`) imports bcc, compiles, loads and attaches; this side receives the
maps, programs and attachments over a Unix socket and never imports bcc. Closing the fds detaches the programs and
frees the maps.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import agent
from agent.bpf import BpfUnavailable, verifier
from agent.bpf.compile import PerfEventAttachment
from agent.bpf.maps import BpfMap, MapSpec
from agent.machine.facts import BccFound

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
BCC_BOOTSTRAP = "\n".join(
    (
        "import json, sys",
        "sys.path.insert(0, sys.argv[1])",
        "from agent.bpf.compile import bcc_origin",
        "print(json.dumps(bcc_origin()))",
    )
)
BCC_TIMEOUT_SECONDS = 30.0  # importing bcc loads LLVM: ~0.1 s here, seconds on a loaded node
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

    Raises BpfUnavailable when the child cannot load it: with the verifier's reason when the verifier refused it
    (the child's output, the compiler's or verifier's, is passed on to this process's stderr as well).
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, tempfile.TemporaryFile() as output:
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
                stderr=output,
            )
        except OSError as error:
            raise BpfUnavailable(f"cannot start the BPF loader for {source}: {error}") from error
        finally:
            theirs.close()
        try:
            data, fds, flags, _ = socket.recv_fds(ours, MAX_MESSAGE, MAX_FDS)
        finally:
            status = child.wait()
            output.seek(0)
            said = output.read()
            with open(2, "wb", closefd=False) as stderr:  # where the child used to write it itself
                stderr.write(said)
    try:
        return _received(source, data, fds, flags, status, child.pid)
    except BpfUnavailable as error:
        for fd in fds:
            os.close(fd)
        raise _with_verifier(error, source, said.decode(errors="replace")) from None
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _with_verifier(error: BpfUnavailable, source: str, output: str) -> BpfUnavailable:
    """*error* with the verifier's reason in its message, when the child's *output* holds a verifier's refusal."""
    refused = verifier.refusal(output)
    if refused is None:
        return error
    program = re.search(r"program b'(\w+)'", str(error))
    name = program.group(1) if program else "a program"
    return BpfUnavailable(f"cannot load {source}: the kernel's verifier refused {name}: {refused.reason}", refused.tail)


def ask_for_bcc() -> Callable[[], BccFound]:
    """Start a child that imports bcc as the loader child does (this process never imports it); the function returned
    waits for its answer: whether bcc imports, its version and where from."""
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", BCC_BOOTSTRAP, PACKAGE_ROOT],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
            stdin=subprocess.DEVNULL,
        )
    except OSError as error:
        failed = BccFound(None, error=f"cannot start {sys.executable} to import bcc: {error}")
        return lambda: failed

    def answer() -> BccFound:
        try:
            out, err = child.communicate(timeout=BCC_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            return BccFound(None, error=f"importing bcc took more than {BCC_TIMEOUT_SECONDS:g} s")
        try:
            return BccFound(**json.loads(out.strip().splitlines()[-1]))
        except (IndexError, ValueError, TypeError):
            last = (err.strip().splitlines() or ["no output"])[-1]
            return BccFound(None, error=f"importing bcc failed: {last}")

    return answer


def _received(source: str, data: bytes, fds: list[int], flags: int, status: int, pid: int) -> LoadedProgram:
    if not data:
        raise BpfUnavailable(
            f"cannot load {source}: the BPF loader exited with status {status} before handing the program over; "
            "its output is above"
        )
    message = json.loads(data)
    if not message["ok"]:
        raise BpfUnavailable(message["error"], fix=message.get("fix", ""))
    if flags & socket.MSG_CTRUNC:
        raise BpfUnavailable(f"cannot load {source}: the kernel objects did not fit in one message")
    maps = {
        entry["name"]: BpfMap(fds[entry["fd"]], MapSpec(**{k: v for k, v in entry.items() if k != "fd"}))
        for entry in message["maps"]
    }
    programs = {entry["name"]: fds[entry["fd"]] for entry in message["programs"]}
    attachments = [fds[entry["fd"]] for entry in message["attachments"]]
    return LoadedProgram(maps, programs, attachments, pid)
