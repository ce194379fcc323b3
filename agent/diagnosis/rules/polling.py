"""polling-storm: idle threads wake from tiny sleeps or poll with tiny timeouts to look for work, thousands of times a
second, and each wake-up costs a trip through the kernel and the scheduler.

Told by the sleep and poll families' calls per second, the time the threads stayed blocked per call (tiny), that
they are idle rather than waiting on locks or I/O (sleeps and polls hold most of their blocked time), and that it
costs CPU (much of it in the kernel). Threads that hand work to each other also sleep and poll often; a pool or
lock finding explains those, so this rule is judged only without one.
"""

from __future__ import annotations

from agent.diagnosis.facts import ThreadView, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Evidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.budget import POLL, SLEEP, busiest_thread, family_rate, thread_name
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATIONS = {
    Mechanism.SHORT_SLEEPS: (
        "Idle threads of this workload sleep a tiny interval (nanosleep, usleep) and wake to look for work, thousands "
        "of times a second: each wake-up is a timer, a context switch and a system call, so threads with nothing to "
        "do cost CPU, most of it in the kernel."
    ),
    Mechanism.SHORT_POLL_TIMEOUTS: (
        "Idle threads of this workload poll (epoll_wait, poll, select) with a tiny or zero timeout and poll again "
        "at once, thousands of times a second: they spin through the kernel instead of sleeping until an event "
        "comes, so threads with nothing to do cost CPU, most of it in the kernel."
    ),
}


BACKED_OFF_SECONDS = 0.01  # the sleep an idle poller backs off to


def polling_fix(mechanism: Mechanism, rate: float, mean: float | None, thread: ThreadView | None) -> Fix:
    """Block on the event instead of polling for it."""
    who = f"; the busiest thread: {thread_name(thread)}" if thread is not None else ""
    each = f" ({1e6 * mean:.0f} us blocked each)" if mean is not None else ""
    if mechanism is Mechanism.SHORT_SLEEPS:
        how = (
            "Replace the sleep loop with a wait on the event itself: a condition variable (pthread_cond_wait, "
            "threading.Condition, queue.get()), an eventfd or pipe in epoll_wait with no timeout, or a futex."
        )
        now = f"from the {1e6 * mean:.0f} us it sleeps now " if mean is not None else ""
        cut = f" about {BACKED_OFF_SECONDS / mean:.0f}-fold" if mean is not None and mean < BACKED_OFF_SECONDS else ""
        or_else = (
            f"If it must poll, back off: grow the sleep {now}towards 10 ms while nothing comes (an adaptive "
            f"timeout), which cuts the wake-ups of an idle thread{cut}."
        )
    else:
        how = (
            "Give epoll_wait/poll/select a timeout of -1 (wait until an fd is ready) or as long as the work allows: "
            "the kernel wakes the thread when an event comes."
        )
        or_else = "A timer the loop needs belongs in the same wait: a timerfd in the epoll set, not a 0 timeout."
    return Fix(
        summary=f"Block on the event instead of polling for it: {rate:,.0f} wake-ups a second now{each}{who}.",
        steps=(how, or_else),
    )


def check(workload: WorkloadView, limits: Thresholds) -> Finding | None:
    """The polling cause for one workload, or None (also when its calls by family are unknown)."""
    sleeps, polls = family_rate(workload, SLEEP), family_rate(workload, POLL)
    if sleeps is None or polls is None or sleeps + polls < limits.polling_calls_per_second:
        return None
    share = workload.system_share
    if share is None or share < limits.polling_system_share:
        return None
    blocked = workload.blocked_by_kind
    mean: float | None = None
    if blocked is not None and workload.seconds:
        asleep = blocked.get("sleep", 0.0)
        total = sum(blocked.values())
        if total > 0 and asleep / total < limits.polling_sleep_share:
            return None  # blocked mostly on locks or I/O: not idle polling
        mean = asleep / workload.seconds / (sleeps + polls)
        if mean > limits.polling_mean_seconds:
            return None
    mechanism = Mechanism.SHORT_SLEEPS if sleeps >= polls else Mechanism.SHORT_POLL_TIMEOUTS
    rate = sleeps + polls
    found: list[Evidence] = [
        evidence("sleeps and polls per second", rate, "/s", f"bar {limits.polling_calls_per_second:,.0f}"),
        evidence("system share of its CPU time", 100 * share, "%", f"bar {100 * limits.polling_system_share:g} %"),
    ]
    if mean is not None:
        found.append(
            evidence(
                "time blocked per sleep or poll",
                1e6 * mean,
                "us",
                f"an idle thread that waits for its event: ms to s; bar {1e6 * limits.polling_mean_seconds:g} us",
            )
        )
    wakeups = workload.rate(workload.voluntary_switches)
    if wakeups is not None:
        found.append(
            evidence("wake-ups per second, every thread", wakeups, "/s", "voluntary context switches, the kernel's")
        )
    if workload.cpu_used_cores is not None:
        found.append(evidence("CPU used", workload.cpu_used_cores, "CPUs", "idle threads: about 0"))
    if mechanism is Mechanism.SHORT_SLEEPS:
        thread = busiest_thread(workload, lambda thread: thread.voluntary_switches_per_second)
        if thread is not None and thread.voluntary_switches_per_second is not None:
            found.append(
                evidence(
                    f"wake-ups per second of {thread_name(thread)}",
                    thread.voluntary_switches_per_second,
                    "/s",
                    "its busiest thread",
                )
            )
    else:
        thread = busiest_thread(workload, lambda thread: thread.system_percent)
        if thread is not None and thread.system_percent is not None:
            found.append(
                evidence(f"kernel CPU of {thread_name(thread)}", thread.system_percent, "%", "its busiest thread")
            )
    return workload_finding(
        workload,
        cause=Cause.POLLING_STORM,
        mechanism=mechanism,
        evidence=tuple(found),
        confidence=Confidence.HIGH if mean is not None else Confidence.MEDIUM,
        fix=polling_fix(mechanism, rate, mean, thread),
        explanation=EXPLANATIONS[mechanism],
        collect_next=() if thread is not None else ("pidstat -wt -p PID 1 5 (which thread wakes most: cswch/s)",),
    )
