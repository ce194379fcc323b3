"""numpy_pool.py CGROUP_DIRS WORKERS THREADS TASKS HOLD

A multiprocessing pool of WORKERS processes doing 300x300 float64 matmuls with a little Python glue, the shape
of the ML pipeline in the seed case. THREADS is the BLAS pool size per worker ("unset" leaves OpenBLAS to size it
to every CPU, the disease; "1" is the fix). Prints {"pid", "seconds", "blas"} and, with HOLD, waits for stdin
to close so the pool's processes are still in their cgroup when the agent is scraped. CGROUP_DIRS "-" stays
put (in a container); TASKS "<N>s" keeps the pool busy for N seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time


def join(dirs: str) -> None:
    if dirs == "-":  # already where it should be (in a container)
        return
    for directory in dirs.split(":"):
        with open(os.path.join(directory, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))


def task(seed: int) -> float:
    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.random((300, 300))
    total = 0.0
    for _ in range(4):
        a = a @ a.T
        a /= np.abs(a).max()
        total += float(a.sum())
        time.sleep(0.002)  # the glue between BLAS calls: idle pool threads spin through it
    return total


def main(dirs: str, workers: str, threads: str, tasks: str, hold: str) -> None:
    join(dirs)
    if threads != "unset":
        for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[variable] = threads
    import multiprocessing

    import numpy as np
    from threadpoolctl import threadpool_info

    blas = [f"{i['internal_api']} {i['version']} threads={i['num_threads']}" for i in threadpool_info()]
    started = time.monotonic()
    # TASKS: a number of tasks, or "<N>s" to keep the pool busy for N seconds.
    deadline = started + float(tasks[:-1]) if tasks.endswith("s") else None
    with multiprocessing.get_context("fork").Pool(int(workers)) as pool:
        batch = 40 if deadline else int(tasks)
        while True:
            for _ in pool.imap(task, range(batch)):
                pass
            if deadline is None or time.monotonic() >= deadline:
                break
    elapsed = time.monotonic() - started
    print(json.dumps({"pid": os.getpid(), "seconds": elapsed, "blas": blas, "numpy": np.__version__}), flush=True)
    if hold == "1":
        sys.stdin.read()


if __name__ == "__main__":
    main(*sys.argv[1:])
