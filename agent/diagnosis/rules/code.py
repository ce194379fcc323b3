"""What the code at the top of a profile, and the call sites of sched_yield and futex, show: never a finding.

A profile (``perf report``, ``perf top``, the agent's on-CPU samples) says where the CPU time went, stacks say
which library's function calls ``sched_yield`` or waits in a futex; neither says how long threads waited for a CPU
or how many there were for how many CPUs. So each is an observation naming the kind of code and the exact command
that tells more. Kinds that are not thread contention (clock reads, page faults, idle CPUs) say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis import pools
from agent.diagnosis.facts import CodeShare, WorkloadView
from agent.diagnosis.findings import Observation
from agent.diagnosis.rules.common import evidence

KIND_SHARE = 0.2  # of all on-CPU samples, for a kind of code to be named
_C_LIBRARY = re.compile(r"^(?:libc\.so|libc-\d|libpthread[.-]|ld-musl-)")  # its caller is the one to name
SITE_SHARE = 0.5  # of the stacks in sched_yield (or futex), for one calling library to be named
# Where thread pools' idle threads wait for work (OpenBLAS's server loop, OpenMP barriers and suspends)
POOL_IDLE = re.compile(r"^blas_thread_server$|^__kmp_suspend|barrier|^gomp_thread_start$|^__kmp_launch_thread$")
LISTED_SHARE = 0.5  # of the samples the rows of a profile hold, for their kernel share to stand for the profile's


@dataclass(frozen=True)
class Kind:
    """A kind of code, the functions that are it, what it means and what to collect next."""

    name: str
    functions: re.Pattern[str]
    meaning: str
    look_next: tuple[str, ...]


RECORD = "perf record -g -p PID -- sleep 10; perf report --stdio --no-children --sort dso,sym -G"
KINDS: tuple[Kind, ...] = (
    Kind(
        "sched-yield",
        re.compile(
            r"^(?:__GI_)?(?:__)?(?:x64_)?(?:sys_|se_sys_)?sched_yield$|^do_sched_yield$|^yield_task_fair$|"
            r"^os_sched_yield$"
        ),
        "threads calling sched_yield in a loop (idle pool threads spinning for work)",
        (f"{RECORD} (which library calls sched_yield)", "perf trace -s -p PID -- sleep 10 (yields per thread)"),
    ),
    Kind(
        "futex",
        re.compile(r"futex|^__lll_lock_wait|^__lll_unlock_wake|^__pthread_mutex_lock_full$"),
        "futex waits and wakes: threads handing a lock or a condition back and forth",
        (f"{RECORD} (which library's lock)", "perf trace -s -p PID -- sleep 10 (futex calls and time per thread)"),
    ),
    Kind(
        "kernel-spin-lock",
        re.compile(
            r"^(?:native_|__pv_)?queued_spin_lock_slowpath$|^_raw_spin_lock(?:_irq|_irqsave|_bh)?$|"
            r"^do_raw_spin_lock$"
        ),
        "a spin lock inside the kernel, taken by many CPUs at once (which lock: the call graph above it)",
        ("perf record -a -g -- sleep 10; perf report --stdio --no-children -S native_queued_spin_lock_slowpath -G",),
    ),
    Kind(
        "user-spin",
        re.compile(
            r"SpinLockDelay|SpinLock::SlowLock|^gomp_(?:team_)?barrier_wait_end$|^gomp_mutex_lock_slow$|"
            r"^do_spin$|^__kmp_(?:wait|yield|hyper_barrier|fork_barrier|join_barrier)|^blas_thread_server$|^inner_thread$|"
            r"^pthread_spin_lock$"
        ),
        "threads spinning in user space while they wait (a pool's barrier or idle loop, or a spin lock)",
        (f"{RECORD} (whose threads spin)", "pidstat -t -p PID 1 5 (%wait: threads waiting for a CPU)"),
    ),
    Kind(
        "scheduler",
        re.compile(
            r"^__?schedule$|^pick_next_task|^put_prev_task|^update_curr$|^finish_task_switch|^__switch_to|"
            r"^context_switch$|^rcu_note_context_switch$|^clear_buddies$|^check_cfs_rq_runtime$|"
            r"^(?:en|de)queue_(?:task|entity)|^set_next_entity$|^try_to_wake_up$|^select_task_rq"
        ),
        "the scheduler itself: threads switching on and off the CPUs very often",
        ("perf stat -e context-switches,cpu-migrations -p PID -- sleep 10", "pidstat -wt -p PID 1 5"),
    ),
    Kind(
        "syscall-entry",
        re.compile(
            r"^entry_SYSCALL|^entry_SYSENTER|^entry_INT80|^__entry_text_start$|^syscall_return_via_sysret$|^do_syscall_64$|"
            r"^sysret32_from_system_call$|^system_call(?:_fastpath|_after_swapgs)?$|"
            r"^syscall_exit_to_user_mode|^exit_to_user_mode"
        ),
        "entering and leaving the kernel: a great many cheap system calls",
        ("perf trace -s -p PID -- sleep 10 (which calls)", "strace -f -c -p PID for 10 s"),
    ),
    Kind(
        "clock-read",
        re.compile(
            r"^read_hpet$|^hpet_.*read|^acpi_pm_read|^pvclock_clocksource_read|^kvm_clock_get_cycles$|"
            r"^read_tsc$|^ktime_get(?:_ts64|_real_ts64)?$|^(?:__x64_)?sys_clock_gettime$|^do_gettimeofday$"
        ),
        "reading the clock inside the kernel: clock reads are system calls (a clock source without vDSO?); "
        "not thread contention",
        ("cat /sys/devices/system/clocksource/clocksource0/current_clocksource",),
    ),
    Kind(
        "page-faults",
        re.compile(
            r"^clear_page(?:_erms|_rep|_orig)?$|page_fault$|^(?:__)?do_page_fault$|^exc_page_fault$|"
            r"^(?:__)?handle_mm_fault$|^do_anonymous_page$|^handle_pte_fault$|^copy_page$|"
            r"^get_page_from_freelist$|^zap_pte_range$|^release_pages$"
        ),
        "page faults and pages being zeroed: memory mapped, touched and unmapped over and over; not thread contention",
        ("perf stat -e page-faults,minor-faults,major-faults -p PID -- sleep 10",),
    ),
    Kind(
        "idle",
        re.compile(
            r"^cpuidle_enter_state$|^intel_idle|^default_idle|^native_safe_halt$|^acpi_idle_do_entry$|"
            r"^poll_idle$|^mwait_idle|^arch_cpu_idle"
        ),
        "CPUs with nothing to run (a machine-wide profile counts idle CPUs too); not contention",
        ("perf top -p PID (the workload alone)",),
    ),
)
NOT_CONTENTION = frozenset({"clock-read", "page-faults", "idle"})
# Kinds entered from user code whose cost is mostly the kernel code below them (the scheduler a yield or a futex
# wait enters, the allocation a fault makes): with perf report --children their inclusive share is their cost. Not
# the entry or the scheduler themselves, whose inclusive share holds every call.
INCLUSIVE_KINDS = frozenset({"sched-yield", "futex", "page-faults"})


def kind_of(row: CodeShare) -> Kind | None:
    """The kind of code *row* is, or None."""
    if row.function is None:
        return None
    name = row.function.split(".", 1)[0] if row.mode == "kernel" else row.function
    return next((kind for kind in KINDS if kind.functions.search(name)), None)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}".rstrip("0").rstrip(".")


def _hot_code(workload: WorkloadView) -> Observation | None:
    samples = workload.cpu_samples
    if not samples:
        return None
    total = workload.cpu_samples_total or sum(row.count for row in samples)
    if total <= 0:
        return None
    by_kind: dict[str, list[CodeShare]] = {}
    for row in samples:
        kind = kind_of(row)
        if kind is not None:
            by_kind.setdefault(kind.name, []).append(row)
    shares = {name: sum(row.count for row in rows) / total for name, rows in by_kind.items()}
    inclusive = {
        name: max(row.inclusive or 0.0 for row in rows) / total
        for name, rows in by_kind.items()
        if name in INCLUSIVE_KINDS
    }
    shares = {name: max(share, inclusive.get(name, 0.0)) for name, share in shares.items()}
    busiest = max(shares, key=lambda name: shares[name], default=None)
    if busiest is None or shares[busiest] < KIND_SHARE:
        return None
    kind = next(kind for kind in KINDS if kind.name == busiest)
    with_callees = inclusive.get(busiest, 0.0) >= shares[busiest] > 0
    if with_callees:
        rows = sorted((row for row in by_kind[busiest] if row.inclusive), key=lambda row: -(row.inclusive or 0.0))
        names = ", ".join(f"{row.function} ({_pct((row.inclusive or 0.0) / total)} % with what it calls)"
                          for row in rows[:4])  # fmt: skip
    else:
        rows = sorted(by_kind[busiest], key=lambda row: -row.count)
        names = ", ".join(f"{row.function} ({_pct(row.count / total)} %)" for row in rows[:4])
    kernel = sum(row.count for row in samples if row.mode == "kernel") / total
    listed = sum(row.count for row in samples) / total  # a paste may hold only the top rows
    summary = f"{_pct(shares[busiest])} % of the on-CPU samples are {kind.meaning}: {names}. "
    if listed >= LISTED_SHARE:
        summary += f"{_pct(kernel)} % of the samples are kernel code. "
    summary += "A profile shows where the CPU time goes, not how many threads wait for how many CPUs."
    shown = [
        evidence(
            f"on-CPU samples in {busiest} code" + (" and the code it calls" if with_callees else ""),
            100 * shares[busiest],
            "%",
            f"bar {100 * KIND_SHARE:g} %",
        )
    ]
    if listed >= LISTED_SHARE:
        shown.append(evidence("on-CPU samples in the kernel", 100 * kernel, "%", "of all samples"))
    return Observation(
        topic=f"hot-code-{busiest}",
        summary=summary,
        evidence=tuple(shown),
        look_next=kind.look_next,
        workload=workload.ref,
    )


def _sites(workload: WorkloadView, sites: tuple[CodeShare, ...] | None, call: str) -> Observation | None:
    if not sites:
        return None
    total = sum(site.count for site in sites)
    profiled = workload.cpu_samples_total
    if call != "sched_yield" and profiled and workload.cpu_samples and total / profiled < KIND_SHARE:
        return None  # a profile's few samples in futex waits: not what it spends its time on
    by_library: dict[str, float] = {}
    for site in sites:
        by_library[site.library] = by_library.get(site.library, 0.0) + site.count
    library = max(by_library, key=lambda name: by_library[name])
    share = by_library[library] / total if total > 0 else 0.0
    if share < SITE_SHARE or library == "(unknown)" or _C_LIBRARY.match(library):
        return None  # frames without a library, or in the C library itself, say nothing of who called
    functions = sorted({site.function or "?" for site in sites if site.library == library})
    pool = pools.implementation_of(library)
    summary = f"{by_library[library]:g} of {total:g} stacks in {call} come from {library} ({', '.join(functions[:3])})."
    look: tuple[str, ...]
    if pool is not None and call == "sched_yield":
        variables = " / ".join(pool.variables) or "its thread count"
        summary += (
            f" That is {pool.implementation}'s thread pool: its idle threads yield while they wait for work, which "
            "burns CPU when the pools' threads outnumber the CPUs."
        )
        look = (
            f"the threads of the process against the CPUs it may use: grep -E 'Threads|Cpus_allowed_list' "
            f"/proc/PID/status; then {variables}=CPUs/workers",
            "schedwatch diagnose (yields per second and the pool's size, live)",
        )
    elif call == "sched_yield":
        look = ("perf trace -s -p PID -- sleep 10 (yields per thread)", "schedwatch diagnose")
    else:
        summary += " Threads in a futex wait are blocked, not on a CPU; in a hang it is a wait nobody ends."
        if pool is not None and all(POOL_IDLE.search(function) for function in functions):
            summary += f" That is {pool.implementation}'s thread pool: its idle threads wait so for work."
        elif pool is not None:
            summary += f" The wait is inside {pool.implementation}'s thread-pool library (not its idle wait)."
        look = ("the thread that should wake them: its stack in the same dump", "perf trace -s -p PID -- sleep 10")
    shown = (evidence(f"stacks in {call} from {library}", 100 * share, "%", f"bar {100 * SITE_SHARE:g} %"),)
    topic = "yield-site" if call == "sched_yield" else "futex-site"
    return Observation(topic, summary, shown, look, workload=workload.ref)


WAITING_LEAVES = {"lock": "a lock (mutex) wait", "allocator-lock": "an allocator's lock", "yield": "sched_yield",
                  "spin": "a spin loop", "futex": "a condition or futex wait"}  # fmt: skip
TAIL_SHARE = 0.1  # of the samples: rows that hold less are the tail of a profile, its top not pasted
UNOWNED_THREADS = 2  # threads of a dump waiting so, for the paste's missing callers to be worth collecting


def _unowned_waits(workload: WorkloadView) -> Observation | None:
    """Threads of a dump waiting in a lock, a yield or a spin whose callers the paste does not show (gdb's ``info
    threads``, stacks cut to one frame): who owns the wait is the next thing to collect."""
    stacks = workload.stacks
    if stacks is None or stacks.unit not in ("threads", "stacks"):
        return None
    groups = [group for group in stacks.groups if group.owner == "unknown" and group.leaf in WAITING_LEAVES]
    weight = sum(group.weight for group in groups)
    if weight < UNOWNED_THREADS:
        return None
    leaf = max(groups, key=lambda group: group.weight).leaf
    summary = (
        f"{weight:g} of {stacks.total:g} threads wait in {WAITING_LEAVES[leaf]}, and the paste does not show who "
        "called it: which lock, and which thread holds it, is in their callers. In a hang it is a wait nobody ends."
    )
    return Observation(
        "stacks-waiting-owner-unknown",
        summary,
        (evidence(f"threads in {WAITING_LEAVES[leaf]} without callers", weight, "threads", f"of {stacks.total:g}"),),
        (
            "gdb -p PID -batch -ex 'thread apply all bt' (every thread's callers: the lock's owner)",
            "perf trace -s -p PID -- sleep 10 (futex calls and time per thread, if it is slow rather than stuck)",
        ),
        workload=workload.ref,
    )


def _listed_all(workload: WorkloadView) -> bool:
    """Stacks of every sample (perf script, bcc, folded...), rather than a profile's rows (perf report, perf top)."""
    return workload.stacks is not None and workload.stacks.unit != "profile rows"


def _profile_tail(workload: WorkloadView) -> Observation | None:
    """A profile pasted without its top: the rows hold a sliver of the samples, so nothing at the top can be named."""
    samples, total = workload.cpu_samples, workload.cpu_samples_total
    if not samples or not total or _listed_all(workload):
        return None  # stacks formats count every sample they list
    listed = sum(row.count for row in samples) / total
    if listed >= TAIL_SHARE:
        return None
    return Observation(
        "profile-tail-collect-next",
        f"The rows pasted hold {100 * listed:.1f} % of the profile's samples, each a sliver: the top of the profile, "
        "where the time goes, is not in the paste.",
        (
            evidence(
                "samples in the rows pasted", 100 * listed, "%", f"the top of a profile: {100 * TAIL_SHARE:g} % or more"
            ),
        ),
        (f"{RECORD} | head -60 (the top rows, with who calls them)",),
        workload=workload.ref,
    )


def _unnamed_top(workload: WorkloadView) -> Observation | None:
    """A profile whose top no kind of code explains (a program's own code, a spread load): the busiest function and
    libraries, and the command that shows who calls them."""
    samples, total = workload.cpu_samples, workload.cpu_samples_total
    if not samples or not total or _listed_all(workload):
        return None
    top = max(samples, key=lambda row: row.count)
    by_library: dict[str, float] = {}
    for row in samples:
        by_library[row.library] = by_library.get(row.library, 0.0) + row.count
    libraries = sorted(by_library.items(), key=lambda item: -item[1])[:3]
    shown = ", ".join(f"{name} {_pct(count / total)} %" for name, count in libraries)
    return Observation(
        "hot-code-collect-next",
        f"No kind of code schedwatch knows holds {100 * KIND_SHARE:g} % of the samples: the busiest function is "
        f"{top.function or '?'} ({top.library}, {_pct(top.count / total)} %); by library {shown}. Which code calls "
        "it, and whether it is the program's own, the call graph tells.",
        (evidence(f"samples in {top.function or '?'}", 100 * top.count / total, "%", "the busiest function"),),
        (f"{RECORD} (who calls the busiest code)", "perf report --stdio --no-children --sort dso (time by library)"),
        workload=workload.ref,
    )


def observations(workload: WorkloadView) -> tuple[Observation, ...]:
    """What *workload*'s on-CPU samples, call sites and stacks show, each with what to collect next."""
    found = [
        hot := _hot_code(workload),
        tail := (None if hot is not None else _profile_tail(workload)),
        None if hot is not None or tail is not None else _unnamed_top(workload),
        _sites(workload, workload.yield_sites, "sched_yield"),
        _sites(workload, workload.futex_sites, "futex waits"),
        _unowned_waits(workload),
    ]
    return tuple(observation for observation in found if observation is not None)
