"""Collectors, registered by name; each can be turned off with --no-collector.NAME.

A collector owns one source (a BPF program, a set of cgroup files), turns what it
reads into metric families, and says whether this machine lets it run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client.core import Metric

from agent.config import Settings
from agent.identity.placement import KeySpace
from agent.identity.resolver import IdentityResolver
from agent.machine.cgroups.activity import CpuStats
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts
from agent.symbols.elf_symbols import SymbolCache


@dataclass(frozen=True)
class Availability:
    """Whether a collector can run here; when not, why and what to do."""

    ok: bool
    reason: str = ""
    fix: str = ""


@dataclass(frozen=True)
class CollectorContext:
    """What a collector gets when it starts."""

    settings: Settings
    facts: MachineFacts
    resolver: CgroupPathResolver  # cgroup2 ids -> paths (the cgroup2 tree, for cgroup_cpu)
    keys: KeySpace  # what the BPF maps are keyed by, and how to place each key
    identities: IdentityResolver
    # (file name, path to open the mapped file) -> the version a library says (pool libraries), for code labels
    library_version: Callable[[str, Path], str | None] | None = None
    cpu_stats: CpuStats | None = None  # cgroup2 cpu.stat read once a scrape for all (None: each reads its own)
    # the functions of mapped files, shared by the collectors that name code (a file parsed once, not once each)
    symbol_cache: SymbolCache | None = None


class Collector(Protocol):
    """A running collector."""

    name: str

    def collect(self) -> list[Metric]:
        """Read the source once and return its metric families (self-metrics included)."""

    def close(self) -> None:
        """Release the source (detach programs)."""


@dataclass(frozen=True)
class CollectorFactory:
    """How to check for and start one collector."""

    name: str
    description: str
    check: Callable[[MachineFacts], Availability]
    start: Callable[[CollectorContext], Collector]


def registry() -> dict[str, CollectorFactory]:
    """Every known collector, by name."""
    from agent.collectors import cgroup_cpu, cgroup_memory, families, oncpu, pressure, sched, syscalls

    factories = [
        syscalls.FACTORY,
        sched.FACTORY,
        families.FACTORY,
        oncpu.FACTORY,
        cgroup_cpu.FACTORY,
        cgroup_memory.FACTORY,
        pressure.FACTORY,
    ]
    return {factory.name: factory for factory in factories}
