"""The live facts of one workload: its processes sampled twice, its pool workers, and, since a workload is read
closely only once it is flagged, each process's thread-pool libraries and thread variables."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from agent.diagnosis.inputs.processes.access import Access, read_private
from agent.diagnosis.inputs.processes.environment import ThreadEnvironment, read_environment
from agent.diagnosis.inputs.processes.libraries import Library, libraries_in
from agent.diagnosis.inputs.processes.sampling import ProcessSample, sample
from agent.diagnosis.inputs.processes.workers import WorkerPool, worker_pools
from agent.log import get_logger
from agent.machine.procfs import MAX_FILE, ProcFS, decode


@dataclass(frozen=True)
class ProcessDetail:
    """What a flagged process has mapped and set."""

    pid: int
    maps_access: Access
    libraries: tuple[Library, ...]
    environment: ThreadEnvironment


@dataclass(frozen=True)
class WorkloadFacts:
    """Processes of one workload with their CPU use, pools, libraries and thread variables."""

    sample: ProcessSample
    pools: tuple[WorkerPool, ...]
    details: dict[int, ProcessDetail]


def process_detail(procfs: ProcFS, pid: int, versions: dict[tuple[int, int, int], str | None]) -> ProcessDetail:
    """Libraries and thread variables of *pid* (reads its maps and environ: only for flagged workloads)."""
    access, raw = read_private(procfs, pid, "maps", MAX_FILE)
    libraries = () if raw is None else tuple(libraries_in(procfs, pid, decode(raw), versions))
    return ProcessDetail(pid, access, libraries, read_environment(procfs, pid))


def gather_workload(procfs: ProcFS, pids: Iterable[int], interval: float = 1.0) -> WorkloadFacts:
    """Sample *pids* over *interval* seconds, group pool workers, and read each live process's details."""
    taken = sample(procfs, pids, interval)
    versions: dict[tuple[int, int, int], str | None] = {}
    details = {process.pid: process_detail(procfs, process.pid, versions) for process in taken.processes}
    facts = WorkloadFacts(taken, tuple(worker_pools(taken.processes)), details)
    get_logger("diagnosis").debug(
        "workload facts",
        processes=len(taken.processes),
        pools=[pool.size for pool in facts.pools],
        libraries=sorted({f"{lib.implementation} {lib.version}" for d in details.values() for lib in d.libraries}),
        # Which thread variables are set, never their values: logs leave the node.
        variables_set=sorted({name for d in details.values() for name, _value in d.environment.values}),
    )
    return facts


def to_jsonable(facts: object) -> Any:
    """Dataclasses, enums, dicts and tuples as plain JSON values."""
    if dataclasses.is_dataclass(facts) and not isinstance(facts, type):
        return {field.name: to_jsonable(getattr(facts, field.name)) for field in dataclasses.fields(facts)}
    if isinstance(facts, Enum):
        return facts.value
    if isinstance(facts, dict):
        return {str(key): to_jsonable(value) for key, value in facts.items()}
    if isinstance(facts, (list, tuple)):
        return [to_jsonable(value) for value in facts]
    return facts
