"""Load a BPF source of empty programs, print 'ready', hold until stdin closes (the benchmark's floor)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from agent.bpf.compile import import_bcc
from agent.machine import kernel


def main(source: str, *cflags: str) -> None:
    """Keep *source* attached until stdin closes."""
    kernel.prepare_headers(kernel.find_kernel_headers(kernel.kernel_release(), os.environ), Path("/run/schedwatch"))
    program = import_bcc().BPF(src_file=source.encode(), cflags=list(cflags))
    print("ready", flush=True)
    sys.stdin.read()
    program.cleanup()


if __name__ == "__main__":
    main(*sys.argv[1:])
