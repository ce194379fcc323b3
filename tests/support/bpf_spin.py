"""A BPF program that holds its CPU: while it runs, the kernel runs no other tracing BPF program on that CPU (a real
way to make schedwatch miss events, as another tracing tool's slow program would)."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent.bpf.compile import import_bcc
from tests.support.agent import REPO

SPIN_WHO = 987654321  # getpriority(PRIO_PROCESS, SPIN_WHO) spins: no process has this pid

# A program runs at most a million verified instructions, so the spin chains itself by tail calls (at most 33)
# until its deadline: up to 120,000 clock reads per link. A spin that ran out of links first is counted in
# `cut_short`.
SOURCE = r"""
BPF_PROG_ARRAY(chain, 1);
BPF_PERCPU_ARRAY(deadline, u64, 1);
BPF_ARRAY(cut_short, u64, 1);

int spin(void *ctx)
{
    u32 zero = 0;
    u64 *until = deadline.lookup(&zero);
    if (!until)
        return 0;
    for (u32 i = 0; i < 30000; i++) {
        bpf_ktime_get_ns();
        bpf_ktime_get_ns();
        bpf_ktime_get_ns();
        if (bpf_ktime_get_ns() >= *until)
            return 0;
    }
    chain.call(ctx, 0);
    u64 *count = cut_short.lookup(&zero);  /* reached only when the tail call failed */
    if (count)
        __sync_fetch_and_add(count, 1);
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


def hold(spin_ns: int) -> None:
    """Load the spin, say "ready", and hold it until stdin closes; then print how many spins ended early."""
    bcc = import_bcc()
    program = bcc.BPF(text=SOURCE.encode(), cflags=[f"-DSPIN_NS={spin_ns}ULL", f"-DSPIN_WHO={SPIN_WHO}"])
    link = program.load_func(b"spin", bcc.BPF.TRACEPOINT)
    program[b"chain"][ctypes.c_int(0)] = ctypes.c_int(link.fd)
    print("ready", flush=True)
    sys.stdin.read()
    cut_short: Any = program[b"cut_short"][ctypes.c_int(0)]
    print(cut_short.value, flush=True)


@contextmanager
def spinning_on_getpriority(spin_ns: int) -> Iterator[None]:
    """While inside, getpriority(PRIO_PROCESS, SPIN_WHO) spins *spin_ns* in a BPF program, held by a child process
    (bcc and its compiler stay out of the test process; kernel headers must be prepared, as the ``headers`` fixture
    does). Fails on leaving if a spin ended before its time."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.bpf_spin", str(spin_ns)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == "ready\n", "the spin program did not load (its error is above)"
        yield
        child.stdin.close()
        cut_short = int(child.stdout.readline())
        assert cut_short == 0, f"{cut_short} spins ended before {spin_ns} ns: this host reads the clock faster"
    finally:
        if not child.stdin.closed:  # left early: the test failed inside
            child.kill()
        child.wait(timeout=30)


if __name__ == "__main__":
    hold(int(sys.argv[1]))
