"""hypervisor-steal: the hypervisor gives this VM's CPUs to others (steal time) while the workload waits for one.

Told by the node's steal share of CPU time (/proc/stat, top's st, mpstat's %steal) and the workload's wait for a
CPU, when that wait is not mostly behind its own threads (an oversubscribed pool waits as long without steal: its
own finding says so). Not the workload's doing, nor anything inside the VM: the fix is the VM's size, type or host.
Where the workload's own wait is unknown (a saved top: its processes, the node's runnable tasks), more runnable tasks
than CPUs say that something waits: the finding is then of medium confidence. Steal with nothing waiting (a VM lent
its idle time) is no one's problem: the node's steal stays an observation (rules/node.py).
"""

from __future__ import annotations

from agent.diagnosis.facts import NodeView, WorkloadView
from agent.diagnosis.findings import Cause, Confidence, Finding, Fix, Mechanism
from agent.diagnosis.rules.common import evidence, workload_finding
from agent.diagnosis.rules.signals import cpus_allowed
from agent.diagnosis.rules.thresholds import Thresholds

EXPLANATION = (
    "The hypervisor runs other guests on this VM's physical CPUs for a large share of the time (steal): the VM's "
    "vCPUs are not running then, so the workload's threads wait for a CPU through no fault of theirs or the node's."
)


def steal_fix(steal: float) -> Fix:
    """Not the workload's fault: the VM's CPUs are oversold."""
    return Fix(
        summary=f"The VM loses {steal:.0f} % of its CPU time to other guests: move it to a host or instance type "
        "with dedicated CPUs, not the workload.",
        steps=(
            "Burstable instances (AWS t2/t3/t4g, GCP e2-shared, Azure B) are throttled this way when their CPU "
            "credits run out: check the credit balance, or use a fixed-performance type.",
            "Otherwise the host is oversubscribed: a larger or dedicated-core instance, or stop and start the VM to "
            "land on another host.",
            "Inside the VM nothing fixes it: more threads only wait longer.",
        ),
    )


def check(workload: WorkloadView, node: NodeView, limits: Thresholds) -> Finding | None:
    """The steal cause for one workload, or None (also when the node's steal or the workload's wait is unknown)."""
    steal = None if node.cpu is None else node.cpu.steal
    if steal is None or steal < limits.steal_percent:
        return None
    cpus = cpus_allowed(workload, node)
    waited = workload.rate(workload.runqueue_wait_seconds)
    found = [evidence("node CPU time stolen by the hypervisor", steal, "%", f"bar {limits.steal_percent:g} %")]
    collect: tuple[str, ...] = ()
    holders = workload.waiting_by_holder
    own = None if holders is None or not sum(holders.values()) else holders.get("self", 0.0) / sum(holders.values())
    if waited is not None and cpus:
        if waited / cpus < limits.steal_wait_per_cpu:
            return None
        if own is not None and own >= limits.steal_own_wait_share:
            return None  # it waits behind its own threads: it would wait as long on a host that stole nothing
        found.append(
            evidence(
                "its wait for a CPU per CPU it may use", waited / cpus, "s/s", f"bar {limits.steal_wait_per_cpu:g}"
            )
        )
    elif node.run_queue is not None and node.cpus and node.run_queue > node.cpus:
        found.append(evidence("node runnable tasks", node.run_queue, "tasks", f"CPUs: {node.cpus}: some wait"))
        collect = ("schedwatch diagnose on the node (how long the workload's own threads wait for a CPU)",)
    else:
        return None
    return workload_finding(
        workload,
        cause=Cause.HYPERVISOR_STEAL,
        mechanism=Mechanism.STEAL,
        evidence=tuple(found),
        confidence=Confidence.MEDIUM if collect else Confidence.HIGH,
        fix=steal_fix(steal),
        explanation=EXPLANATION,
        collect_next=collect,
    )
