"""The syscalls collector: sched_yield and futex per workload (and per process for the most active)."""

from __future__ import annotations

from agent.bpf.probes.syscalls import REQUIRED_TRACEPOINTS, SyscallProbe
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.bpf_collector import BpfCollector
from agent.collectors.common.limits import probe_limits
from agent.machine.facts import MachineFacts
from agent.tables.syscalls import TABLE

NAME = TABLE.collector


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the syscall tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SyscallsCollector(BpfCollector):
    """sched_yield and futex counts per workload (and per process for the most active): agent/tables/syscalls.py."""

    name = NAME
    table = TABLE

    def __init__(self, context: CollectorContext, probe: SyscallProbe | None = None) -> None:
        """*probe*: read instead of loading the program (tests hand fixture snapshots in)."""
        if probe is None:
            probe = SyscallProbe(
                probe_limits(context.settings, context.keys), context.facts.tracefs, TABLE.layout.vector
            )
        super().__init__(context, probe)


FACTORY = CollectorFactory(
    NAME, "sched_yield and futex calls, futex wait time (bpf/syscalls.bpf.c)", check, SyscallsCollector
)
