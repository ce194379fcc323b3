"""How large a probe's maps are, and which key space and pid namespace it counts in."""

from __future__ import annotations

import os

from agent.bpf.probes.base import ProbeLimits
from agent.config import Settings
from agent.identity.placement import KeySpace

PROCESS_KEYS = 16384


def probe_limits(settings: Settings, keys: KeySpace) -> ProbeLimits:
    """Map sizes and key space for a probe and, in sidecar mode, the (device, inode) of the agent's pid namespace.

    Keyed by process, the per-workload map holds one entry per process: it gets at least PROCESS_KEYS entries.
    """
    namespace = None
    if settings.sidecar:
        info = os.stat("/proc/self/ns/pid")
        namespace = (info.st_dev, info.st_ino)
    workloads = workload_map_size(settings, keys.per_process)
    return ProbeLimits(
        workloads, settings.max_processes, settings.max_threads, namespace, keys.per_process, keys.place_hierarchy
    )


def workload_map_size(settings: Settings, per_process: bool) -> int:
    """Capacity of the per-workload maps: --max-cgroups, and at least PROCESS_KEYS when keyed by process."""
    return max(settings.max_cgroups, PROCESS_KEYS) if per_process else settings.max_cgroups
