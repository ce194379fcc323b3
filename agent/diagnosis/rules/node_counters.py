"""Observations from the node's kernel counters: page reclaim and compaction (``/proc/vmstat``), soft interrupts per
CPU (``/proc/softirqs``). Memory and interrupt work, never thread contention: each says what the counters show,
whether they are since boot or of a window, and what to collect to know whether it happens now and where.
"""

from __future__ import annotations

from agent.diagnosis.facts import Facts, ReclaimCounts, SoftirqCounts
from agent.diagnosis.findings import Evidence, Observation
from agent.diagnosis.rules.common import evidence

# Soft interrupts that run on the CPU which took the device's interrupt: where they pile up, so does the device.
DEVICE_SOFTIRQS = {
    "NET_RX": "packets received",
    "NET_TX": "packets sent",
    "BLOCK": "disk I/O completions",
}
# Fewer than this many in the counts: too few to say where they run. The shared 2-CPU development VM's background
# traffic measured 1,084 NET_RX in 60 s, 67 % of them on one CPU (under the 2-CPU bar of 90 %).
MIN_SOFTIRQS = 1_000
VMSTAT_TWICE = (
    "grep -E 'allocstall|pgscan|pgsteal|compact_(stall|fail)' /proc/vmstat; sleep 10; "
    "grep -E 'allocstall|pgscan|pgsteal|compact_(stall|fail)' /proc/vmstat (the difference is now)"
)
SOFTIRQS_TWICE = "cat /proc/softirqs; sleep 10; cat /proc/softirqs (the difference is now)"


def one_cpu_bar(cpus: int) -> float:
    """The share of a device's soft interrupts on one CPU that is a pile-up: half of them, and at least twice an even
    share (on 2 CPUs 90 %: an even spread there is 50 %)."""
    return min(0.9, max(0.5, 2 / cpus)) if cpus > 1 else 1.1


def _count(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f}"


def _reclaim(counts: ReclaimCounts) -> Observation | None:
    stalls = (counts.allocation_stalls or 0) + (counts.compaction_stalls or 0)
    if stalls <= 0 and not counts.scanned_direct:
        return None
    when = "Since boot" if counts.since_boot else "Between the two readings"
    parts = []
    if counts.allocation_stalls is not None or counts.scanned_direct is not None:
        parts.append(
            f"allocations stalled in direct reclaim {_count(counts.allocation_stalls)} times "
            f"({_count(counts.scanned_direct)} pages scanned, {_count(counts.stolen_direct)} reclaimed)"
        )
    if counts.compaction_stalls is not None:
        parts.append(
            f"in compaction {_count(counts.compaction_stalls)} times ({_count(counts.compaction_failures)} failed)"
        )
    if counts.scanned_kswapd is not None or counts.stolen_kswapd is not None:
        parts.append(
            f"kswapd scanned {_count(counts.scanned_kswapd)} pages and reclaimed {_count(counts.stolen_kswapd)}"
        )
    summary = (
        f"{when}, {'; '.join(parts)}. A task that allocates memory stalls while the kernel frees or moves pages: "
        "memory pressure, not thread contention."
    )
    if counts.since_boot:
        summary += " Counts since boot cannot say whether it happens now."
    shown: list[Evidence] = []
    if counts.allocation_stalls is not None:
        shown.append(evidence("allocations stalled in direct reclaim", counts.allocation_stalls, "stalls", "none"))
    if counts.compaction_stalls is not None:
        shown.append(evidence("allocations stalled in compaction", counts.compaction_stalls, "stalls", "none"))
    look = [VMSTAT_TWICE, "cat /proc/pressure/memory (how long tasks stalled on memory)"]
    if counts.compaction_stalls:
        look.append(
            "cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag "
            "(compaction on huge-page faults)"
        )
    return Observation("memory-reclaim", summary, tuple(shown), tuple(look))


def _softirqs(counts: SoftirqCounts) -> Observation | None:
    for name, what in DEVICE_SOFTIRQS.items():
        per_cpu = counts.by_type.get(name)
        if not per_cpu or len(per_cpu) < 2:
            continue
        total = sum(per_cpu)
        if total < MIN_SOFTIRQS:
            continue
        busiest = max(range(len(per_cpu)), key=lambda cpu: per_cpu[cpu])
        share = per_cpu[busiest] / total
        bar = one_cpu_bar(len(per_cpu))
        if share < bar:
            continue
        when = "since boot" if counts.since_boot else "between the two readings"
        summary = (
            f"{100 * share:.0f} % of the {name} soft interrupts ({what}) {when} ran on CPU {busiest} of "
            f"{len(per_cpu)}: the device's interrupts land on one CPU, which does that work for every process. "
            "Interrupt load, not thread contention."
        )
        look = [
            "cat /proc/interrupts (which CPU takes the device's interrupts)",
            "mpstat -P ALL 1 5 (that CPU's %soft)",
        ]
        if name.startswith("NET"):
            look.append("ethtool -l DEV (receive queues); /sys/class/net/DEV/queues/rx-*/rps_cpus (spread by RPS)")
        if counts.since_boot:
            look.insert(0, SOFTIRQS_TWICE)
        shown = (evidence(f"{name} soft interrupts on CPU {busiest}", 100 * share, "%", f"bar {100 * bar:g} %"),)
        return Observation("softirqs-on-one-cpu", summary, shown, tuple(look))
    return None


def observations(facts: Facts) -> tuple[Observation, ...]:
    """What the node's reclaim and soft-interrupt counters show, each with what to collect next."""
    found = [
        _reclaim(facts.node.reclaim) if facts.node.reclaim is not None else None,
        _softirqs(facts.node.softirqs) if facts.node.softirqs is not None else None,
    ]
    return tuple(observation for observation in found if observation is not None)
