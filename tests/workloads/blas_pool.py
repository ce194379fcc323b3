"""blas_pool.py WORKERS BUSY_SECONDS [--on-go]

A fork multiprocessing.Pool of WORKERS processes on numpy's BLAS: every worker does matmuls (which starts its BLAS
thread pool), then the pool stays alive, idle, until stdin closes. With BUSY_SECONDS > 0 the workers first keep
their BLAS pools busy that long. With --on-go, once numpy is imported and the workers forked it prints
{"ready": pid} and starts the work only when a line comes on stdin (on a slow machine the start alone can take
minutes). Prints, while holding, {"pid", "numpy", "workers": {pid: {"threads", "blas"}}} where "threads" is the
worker's thread count once idle and "blas" what threadpoolctl says of its BLAS library.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from typing import Any

import numpy as np
from threadpoolctl import threadpool_info

BARRIER: Any = None  # set in each worker: every task waits for all, so that each worker holds exactly one


def join(barrier: Any) -> None:
    global BARRIER
    BARRIER = barrier


def work(deadline: float) -> tuple[int, int, list[dict[str, object]]]:
    a = np.random.default_rng(os.getpid()).random((300, 300))
    while True:
        a = a @ a.T
        a /= np.abs(a).max()
        if time.monotonic() >= deadline:
            break
    blas = [
        {key: info.get(key) for key in ("internal_api", "version", "num_threads", "filepath")}
        for info in threadpool_info()
        if info["user_api"] == "blas"
    ]
    BARRIER.wait(timeout=120)
    return os.getpid(), len(os.listdir("/proc/self/task")), blas


def main(workers: str, busy: str, on_go: str = "") -> None:
    count = int(workers)
    context = multiprocessing.get_context("fork")
    pool = context.Pool(count, initializer=join, initargs=(context.Barrier(count),))
    if on_go == "--on-go":
        print(json.dumps({"ready": os.getpid()}), flush=True)
        sys.stdin.readline()
    deadline = time.monotonic() + float(busy)
    results = pool.map(work, [deadline] * count, chunksize=1)
    report = {pid: {"threads": threads, "blas": blas} for pid, threads, blas in results}
    print(json.dumps({"pid": os.getpid(), "numpy": np.__version__, "workers": report}), flush=True)
    sys.stdin.read()
    pool.terminate()
    pool.join()


if __name__ == "__main__":
    main(*sys.argv[1:])
