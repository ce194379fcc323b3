"""The loader child: :func:`main` with SOCKET_FD SOURCE DEFINES_JSON [PERF_EVENTS_JSON], started by
:mod:`agent.bpf.handover`.

Compiles bpf/SOURCE with bcc, loads and attaches it exactly as the agent used to in-process, then sends every kernel
object the program needs to go on running over the Unix socket SOCKET_FD (SCM_RIGHTS): its maps, its programs, and
the perf events or BPF links that attach them. Then it exits without letting bcc detach anything: the receiver's
copies of the fds keep the programs attached and the maps alive, and the compiler's ~100 MB go with this process.
A failure is sent as a message (``{"ok": false, "error": ..., "fix": ...}``); bcc's compiler and verifier output goes
to this process's stderr, which the agent reads (agent.bpf.verifier) and passes on.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
from dataclasses import asdict
from typing import Any

from agent.bpf import BpfUnavailable, syscall
from agent.bpf.compile import PerfEventAttachment, compile_program, import_bcc
from agent.bpf.maps import MapSpec

ATTACHMENT_INODES = ("anon_inode:[perf_event]", "anon_inode:bpf-link", "anon_inode:bpf_link")
_PR_SET_PDEATHSIG = 1


def manifest(program: Any) -> tuple[dict[str, Any], list[int]]:
    """The message describing *program* (a bcc.BPF) and the fds it refers to by index."""
    lib = import_bcc().lib
    lib.bpf_num_tables.restype = ctypes.c_size_t
    lib.bpf_num_tables.argtypes = [ctypes.c_void_p]
    lib.bpf_table_name.restype = ctypes.c_char_p
    lib.bpf_table_name.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fds: list[int] = []
    maps = []
    for index in range(lib.bpf_num_tables(program.module)):
        name = lib.bpf_table_name(program.module, index)
        fd = lib.bpf_table_fd(program.module, name)
        if fd < 0:
            continue
        info = syscall.map_info(fd)
        spec = MapSpec(
            name=name.decode(),
            map_type=info.type,
            key_size=info.key_size,
            value_size=info.value_size,
            max_entries=info.max_entries,
            key_desc=(lib.bpf_table_key_desc(program.module, name) or b"").decode(),
            leaf_desc=(lib.bpf_table_leaf_desc(program.module, name) or b"").decode(),
        )
        maps.append({"fd": len(fds), **asdict(spec)})
        fds.append(fd)
    programs = []
    for function_name, function in program.funcs.items():
        programs.append({"fd": len(fds), "name": function_name.decode()})
        fds.append(function.fd)
    attachments = []
    for fd, target in open_fds():
        if target in ATTACHMENT_INODES:
            attachments.append({"fd": len(fds), "kind": target})
            fds.append(fd)
    return {"ok": True, "maps": maps, "programs": programs, "attachments": attachments}, fds


def open_fds() -> list[tuple[int, str]]:
    """(fd, what it is) of each descriptor this process holds."""
    found = []
    for entry in os.listdir("/proc/self/fd"):
        try:
            found.append((int(entry), os.readlink(f"/proc/self/fd/{entry}")))
        except OSError:
            continue  # the listing's own descriptor, closed by now
    return sorted(found)


def main(argv: list[str]) -> int:
    """Load, hand over, and leave without cleaning up. argv: SOCKET_FD SOURCE DEFINES_JSON [PERF_EVENTS_JSON]."""
    sock = socket.socket(fileno=int(argv[0]))
    # Die with the agent rather than hold programs nobody reads.
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    source, defines = argv[1], json.loads(argv[2])
    perf_events = tuple(PerfEventAttachment(**event) for event in json.loads(argv[3])) if len(argv) > 3 else ()
    try:
        program = compile_program(source, defines, perf_events)
        message, fds = manifest(program)
    except BpfUnavailable as error:
        sock.sendall(json.dumps({"ok": False, "error": str(error), "fix": error.fix}).encode())
        return 1
    socket.send_fds(sock, [json.dumps(message).encode()], fds)
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: bcc's atexit handler would detach the tracepoints (PERF_EVENT_IOC_DISABLE reaches the shared event).
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
