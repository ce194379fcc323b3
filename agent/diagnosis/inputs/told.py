"""What the user knows and the inputs may not say, given on the command line (``--cpus``, ``--workers`` of analyze
and compare): the machine's CPUs and its pool's worker processes, merged into the facts so that the rules can put a
number in the fix. The told value wins over what a file shows, and the report says so."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agent.diagnosis.facts import Facts, WorkloadView

MAX_CPUS = 65536  # more than any machine Linux runs on today (NR_CPUS is at most 8192)


@dataclass(frozen=True)
class Told:
    """The CPUs and pool workers given on the command line; None where not given."""

    cpus: int | None = None
    workers: int | None = None

    def __bool__(self) -> bool:
        return self.cpus is not None or self.workers is not None

    @property
    def source(self) -> str:
        """How the report lists it among its inputs."""
        given = [f"--{name} {value}" for name, value in (("cpus", self.cpus), ("workers", self.workers)) if value]
        return "told on the command line: " + " ".join(given)


def main_workload(workloads: tuple[WorkloadView, ...]) -> WorkloadView | None:
    """The workload a told pool belongs to: the one that yields most (then waits on futexes most, then has most
    threads)."""
    return max(
        workloads,
        key=lambda w: (w.sched_yield_calls or 0.0, w.futex_wait_seconds or 0.0, w.threads or 0),
        default=None,
    )


def with_told(facts: Facts, told: Told) -> Facts:
    """*facts* with the told CPUs as the node's and the told workers as the pool workers of its main workload."""
    if not told:
        return facts
    node, notes = facts.node, list(facts.notes)
    if told.cpus is not None:
        if node.cpus is not None and node.cpus != told.cpus:
            notes.append(f"told {told.cpus} CPUs, where the inputs show {node.cpus}: the told number is used")
        node = dataclasses.replace(node, cpus=told.cpus)
    workloads = facts.workloads
    if told.workers is not None:
        main = main_workload(workloads)
        if main is None:
            notes.append(f"told {told.workers} pool workers, but the inputs show no workload to give them to")
        workloads = tuple(
            dataclasses.replace(workload, pool_workers=told.workers) if workload is main else workload
            for workload in workloads
        )
    return dataclasses.replace(
        facts, node=node, workloads=workloads, sources=(*facts.sources, told.source), notes=tuple(notes)
    )
