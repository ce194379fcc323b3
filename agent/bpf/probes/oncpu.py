"""On-CPU samples per workload (bpf/oncpu.bpf.c): a cpu-clock perf event on every CPU runs the program, which counts
samples by (workload key, process, address, mode); read and emptied at each read."""

from __future__ import annotations

from dataclasses import dataclass

from agent.bpf import handover
from agent.bpf.compile import PerfEventAttachment
from agent.bpf.probes.base import MapHealth, ProbeLimits, common_defines
from agent.bpf.stats import ProgramStats, program_stats

PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_CPU_CLOCK = 0
MAX_SAMPLE_HZ = 1000  # per CPU; perf's own default is 4000, but this is meant to stay on
DEFAULT_SAMPLE_SLOTS = 16384  # distinct (workload, process, address) between two reads
DROP_SITE_SLOT = 4  # bpf/schedwatch.h: DROP_SITE_MAP


@dataclass(frozen=True)
class Sample:
    """Samples at one address of one process of one workload since the last read."""

    workload: int
    tgid: int
    address: int
    kernel: bool
    count: int


@dataclass(frozen=True)
class OnCpuSnapshot:
    """What the map held since the last read, and the map's health."""

    samples: list[Sample]
    health: MapHealth


class OnCpuProbe:
    """The loaded sampling program and its perf events; :meth:`read` empties the map."""

    source = "oncpu.bpf.c"

    def __init__(self, limits: ProbeLimits, frequency: int, slots: int = DEFAULT_SAMPLE_SLOTS) -> None:
        if not 1 <= frequency <= MAX_SAMPLE_HZ:
            raise ValueError(f"sampling frequency {frequency} Hz is outside 1..{MAX_SAMPLE_HZ}")
        self.frequency = frequency
        self.slots = slots
        defines = common_defines(limits, None)
        for unused in ("MAX_CGROUPS", "MAX_PROCESSES", "MAX_THREADS", "HAVE_GROUP_DEAD", "PLACE_HIERARCHY"):
            defines.pop(unused, None)
        defines["MAX_SAMPLE_SLOTS"] = slots
        event = PerfEventAttachment("on_cpu_sample", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, frequency)
        self._program = handover.load(self.source, defines, (event,))
        self._dropped = 0

    @property
    def cpus_sampled(self) -> int:
        """How many perf events (one per online CPU at load) run the program."""
        return len(self._program.attachments)

    def read(self) -> OnCpuSnapshot:
        """The samples counted since the last read (deleted from the map as they are read)."""
        drained = self._program.maps["samples"].drain()
        samples = [
            Sample(key.workload, key.tgid, key.address, bool(key.kernel), int(count)) for key, count in drained if count
        ]
        drops = self._program.maps["drops"].get(DROP_SITE_SLOT) or 0
        health = MapHealth({"samples": len(drained)}, {"samples": self.slots}, {"samples": drops})
        return OnCpuSnapshot(samples, health)

    def program_stats(self) -> list[ProgramStats]:
        """Kernel accounting of the program."""
        return program_stats(self._program.programs)

    def close(self) -> None:
        """Close the perf events and free the map."""
        self._program.close()
