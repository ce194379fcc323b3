"""allocator-churn: the allocator hands freed memory back to the kernel (munmap, madvise, a shrinking brk) and the
program asks for it again at once, so every round maps, faults in and zeroes the same pages afresh.

Told by page faults a second (every new page is one) with memory mapped and unmapped, and the kernel's share of the
CPU. Where page faults are not known (a cgroup without a memory controller), memory calls alone at a high rate make
it likely. Process churn explains the mappings and faults of processes that start and exit, so this rule is judged
only without that finding.
"""

from __future__ import annotations

from agent.diagnosis.allocators import GLIBC, JEMALLOC, MIMALLOC, TCMALLOC
from agent.diagnosis.facts import ProcessView, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.budget import MEMORY, PROCESS, family_rate
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.thresholds import Thresholds

PAGE = 4096  # bytes per page fault of an anonymous page (x86_64, aarch64 with 4 KiB pages)
MIB = 1 << 20
# glibc maps a block this large afresh whatever the thresholds say, in every thread but the main one (its arenas'
# heaps are 64 MiB); in the main thread MALLOC_MMAP_MAX_=0 makes it come from the heap.
THREAD_ARENA_LIMIT = 64 * MIB

EXPLANATION = (
    "The workload's allocator returns freed memory to the kernel and the program asks for it again at once: every "
    "round maps fresh memory, takes a page fault for each page and has the kernel zero it, then unmaps it. glibc does "
    "this for every block of 32 MiB or more, and for smaller ones when told to trim eagerly."
)


def _size_text(size: int) -> str:
    return f"{size // MIB} MiB" if size >= MIB else f"{size // 1024} KiB"


def _keep_threshold(block: float | None) -> int | None:
    """A trim threshold that keeps a freed block of *block* bytes: twice it, rounded up to a power of two, at least
    128 MiB; None when the block's size is unknown."""
    if block is None:
        return None
    wanted = max(128 * MIB, 2 * block)
    size = 128 * MIB
    while size < wanted:
        size *= 2
    return size


def _set_now(processes: tuple[ProcessView, ...]) -> dict[str, str]:
    """The allocator variables set in the workload's processes (the first value seen of each)."""
    names = {*GLIBC.variables, *JEMALLOC.variables, *TCMALLOC.variables, *MIMALLOC.variables}
    found: dict[str, str] = {}
    for process in processes:
        for name, value in process.environment or ():
            if name in names:
                found.setdefault(name, value)
    return found


def allocator_fix(block: float | None, threads: int | None, processes: tuple[ProcessView, ...] | None) -> Fix:
    """Keep freed memory for reuse: glibc's thresholds filled in from the block size, or the formula."""
    keep = _keep_threshold(block)
    current = _set_now(processes or ())
    variables = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(keep)} if keep is not None else {}
    if keep is not None and block is not None:
        settings = f"MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_={keep}"
        summary = (
            f"Keep freed memory for reuse: {settings} (blocks of about {_size_text(int(block))} come from the heap "
            f"and stay there; up to {_size_text(keep)} per process is kept instead of handed back)."
        )
    else:
        settings = "MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=N"
        summary = (
            f"Keep freed memory for reuse: {settings}, N = twice the size of the block it frees and allocates again "
            "(page faults per munmap x 4 KiB), at least 134217728."
        )
    steps = [
        f"glibc: set {settings} in the environment of the workload (Kubernetes: env of the container; Docker: -e).",
        "Or reuse the buffer in the program (allocate it once, keep it for the next round): no allocator setting "
        "is needed then.",
        "jemalloc (LD_PRELOAD=libjemalloc.so.2): MALLOC_CONF=dirty_decay_ms:10000,muzzy_decay_ms:10000 keeps freed "
        "pages for 10 s; mimalloc: MIMALLOC_PURGE_DELAY=1000; tcmalloc: TCMALLOC_RELEASE_RATE=0.",
    ]
    if threads is not None and threads > 1 and (block is None or block >= THREAD_ARENA_LIMIT):
        steps.append(
            "In threads other than the main one glibc maps blocks of 64 MiB or more afresh whatever the thresholds "
            "say: there, reuse the buffer or use jemalloc."
        )
    for name, value in sorted(current.items()):
        steps.append(f"Now {name}={value} is set in its processes: the fix replaces it.")
    steps.append("Check it with `schedwatch verify -- <the command>` before rolling it out.")
    return Fix(summary=summary, steps=tuple(steps), variables=variables)


def check(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """The allocator cause for one workload, or None (also when its calls by family are unknown)."""
    maps = family_rate(workload, MEMORY)
    share = workload.system_share
    if maps is None or share is None or share < limits.alloc_system_share:
        return None
    faults = workload.rate(workload.page_faults)
    if faults is not None:
        if faults < limits.alloc_faults_per_second or maps < limits.alloc_map_calls_per_second:
            return None
    elif maps < limits.alloc_calls_without_faults:
        return None
    elif workload.processes_exited is None and (family_rate(workload, PROCESS) or 0.0) >= limits.churn_exits_per_second:
        return None  # processes may be starting and ending (exits not counted): their loaders map memory too
    found: list[Evidence] = []
    block: float | None = None
    if faults is not None:
        found.append(evidence("page faults per second", faults, "/s", f"bar {limits.alloc_faults_per_second:,.0f}"))
        block = faults * PAGE / (maps / 2)  # a map and an unmap per round
        found.append(
            evidence(
                "bytes faulted in per map and unmap (about the block it frees)",
                block,
                "B",
                "page faults x 4 KiB / (memory calls / 2)",
            )
        )
    found.append(
        evidence(
            "mmap, munmap, madvise, brk calls per second",
            maps,
            "/s",
            f"bar {limits.alloc_map_calls_per_second:g} with faults, {limits.alloc_calls_without_faults:,.0f} without",
        )
    )
    found.append(
        evidence("system share of its CPU time", 100 * share, "%", f"bar {100 * limits.alloc_system_share:g} %")
    )
    threads = workload.threads
    return workload_finding(
        workload,
        cause=Cause.ALLOCATOR_CHURN,
        mechanism=Mechanism.UNMAP_REFAULT,
        evidence=tuple(found),
        confidence=Confidence.HIGH if faults is not None else Confidence.MEDIUM,
        fix=allocator_fix(block, threads, workload.processes),
        explanation=EXPLANATION,
        collect_next=()
        if faults is not None
        else ("perf stat -e page-faults -p PID -- sleep 10 (page faults a second: the pages it maps afresh)",),
    )
