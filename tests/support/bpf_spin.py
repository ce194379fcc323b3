"""A BPF program that holds its CPU: while it runs, the kernel runs no other tracing BPF program on that CPU (a real
way to make schedwatch miss events, as another tracing tool's slow program would)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent import bpf

SPIN_WHO = 987654321  # getpriority(PRIO_PROCESS, SPIN_WHO) spins; as in tests/workloads/woken_under_bpf.c

# A program runs at most a million verified instructions, so the spin chains itself by tail calls (at most 33)
# until its deadline: about 50,000 clock reads per link.
SOURCE = r"""
BPF_PROG_ARRAY(chain, 1);
BPF_PERCPU_ARRAY(deadline, u64, 1);

int spin(void *ctx)
{
    u32 zero = 0;
    u64 *until = deadline.lookup(&zero);
    if (!until)
        return 0;
    for (u32 i = 0; i < 50000; i++) {
        if (bpf_ktime_get_ns() >= *until)
            return 0;
    }
    chain.call(ctx, 0);
    return 0;
}

TRACEPOINT_PROBE(syscalls, sys_enter_getpriority)
{
    if (args->who != SPIN_WHO)
        return 0;
    u32 zero = 0;
    u64 *until = deadline.lookup(&zero);
    if (!until)
        return 0;
    *until = bpf_ktime_get_ns() + SPIN_NS;
    chain.call(args, 0);
    return 0;
}
"""


@contextmanager
def spinning_on_getpriority(spin_ns: int) -> Iterator[Any]:
    """While inside, getpriority(PRIO_PROCESS, SPIN_WHO) spins *spin_ns* in a BPF program (kernel headers must be
    prepared, as the ``headers`` fixture does)."""
    bcc = bpf.import_bcc()
    program = bcc.BPF(text=SOURCE.encode(), cflags=[f"-DSPIN_NS={spin_ns}ULL", f"-DSPIN_WHO={SPIN_WHO}"])
    try:
        link = program.load_func(b"spin", bcc.BPF.TRACEPOINT)
        program[b"chain"][ctypes.c_int(0)] = ctypes.c_int(link.fd)
        yield program
    finally:
        program.cleanup()
