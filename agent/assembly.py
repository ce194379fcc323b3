"""The one way to have an agent in this process: :func:`open_agent` prepares the machine, asks the container
runtimes, builds what every collector gets, starts the collectors of the mode (agent.collectors.starting: under
--mode auto, a BPF collector BPF does not serve runs in its form without BPF and says so), and closes it all again.

`run` serves what it opened; `diagnose` and `top` read it as a source of series; `verify` counts its runs with it;
`check` opens it to see what loads (with ``--no-load``, only what would); `profile` opens it without collectors for
the machine and the workload keys its sampling program needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from agent import config, log
from agent.bpf import BpfUnavailable
from agent.bpf.handover import ask_for_bcc
from agent.bpf.stats import enable_bpf_stats
from agent.collectors import CollectorContext, modes
from agent.collectors.common.limits import workload_map_size
from agent.collectors.starting import Started, start_collectors
from agent.diagnosis.inputs.processes import census
from agent.diagnosis.inputs.processes.libraries import file_version
from agent.diagnosis.standing import EVALUATE_SECONDS, StandingFindings, node_ticks
from agent.exporter import AgentCollector
from agent.identity.placement import CgroupKeys, KeySpace, ProcessKeys
from agent.identity.resolver import IdentityResolver
from agent.identity.runtimes import RuntimeClient
from agent.identity.runtimes.containerd import ContainerdClient
from agent.identity.runtimes.cri import CriClient
from agent.identity.runtimes.docker import DockerClient
from agent.machine import kernel
from agent.machine.cgroups.activity import CpuStats
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.clocksource import read_clocksource
from agent.machine.cpus import online_cpu_count
from agent.machine.facts import MachineFacts, gather
from agent.machine.procfs import ProcFS
from agent.symbols.elf_symbols import SymbolCache


def prepare_machine(settings: config.Settings) -> MachineFacts:
    """The facts for these settings (their --cgroup-root and --state-dir), prepared as :func:`prepare` does."""
    return prepare(settings.cgroup_root, settings.state_dir)


def prepare(cgroup_root: Path | None, state_dir: Path) -> MachineFacts:
    """Gather the machine's facts, mounting tracefs and laying out kernel headers for bcc (in *state_dir*) where
    needed, and whether bcc imports. Nothing raises: what could not be prepared is in the facts (no tracefs,
    headers_error, bcc's error)."""
    bcc = ask_for_bcc()  # a child imports it meanwhile
    logger = log.get_logger("machine")
    if kernel.tracefs_root() is None and kernel.tracefs_denied() is None:
        try:
            root = kernel.mount_tracefs()
            logger.info("tracefs_mounted", path=str(root))
        except OSError as error:
            logger.warning("tracefs_unavailable", error=str(error))
    facts = gather(cgroup_root)
    if facts.headers is not None:
        try:
            facts = replace(facts, headers=kernel.prepare_headers(facts.headers, state_dir))
        except OSError as error:
            facts = replace(
                facts,
                headers=None,
                headers_error=f"cannot prepare headers in {state_dir}: {error}; pass a writable --state-dir",
            )
    return replace(facts, bcc=bcc())


def build_identities(settings: config.Settings) -> IdentityResolver:
    """The runtime clients the settings name, behind a background resolver (not started)."""
    clients: list[RuntimeClient] = [
        DockerClient(path, settings.runtime_timeout, name="podman" if "podman" in str(path) else "docker")
        for path in settings.docker_sockets
        if path not in settings.kubelet_docker_sockets
    ]
    clients += [
        DockerClient(path, settings.runtime_timeout, name="kubelet-docker", kubelet=True)
        for path in settings.kubelet_docker_sockets
    ]
    clients += [CriClient(path, settings.runtime_timeout) for path in settings.cri_sockets]
    if settings.containerd_socket is not None:
        clients.append(
            ContainerdClient(settings.containerd_socket, settings.containerd_namespaces, settings.runtime_timeout)
        )
    return IdentityResolver(clients)


def build_context(settings: config.Settings, facts: MachineFacts, identities: IdentityResolver) -> CollectorContext:
    """What every collector gets: settings, facts, the cgroup2 tree, the workload key space, names."""
    resolver = CgroupPathResolver(facts.cgroup_root)
    keys = workload_keys(settings, facts, resolver)
    cpu_stats = CpuStats(facts.cgroup_root, settings.max_cgroups, lambda: resolver.round)
    return CollectorContext(
        settings,
        facts,
        resolver,
        keys,
        identities,
        library_version=pool_library_version(),
        cpu_stats=cpu_stats,
        symbol_cache=SymbolCache(),
    )


def pool_library_version() -> Callable[[str, Path], str | None]:
    """The version a thread-pool library file says (diagnosis.pools' rows), one read per file."""
    versions: dict[tuple[int, int, int], str | None] = {}

    def version_of(basename: str, opened: Path) -> str | None:
        return file_version(basename, opened, versions)

    return version_of


def workload_keys(settings: config.Settings, facts: MachineFacts, resolver: CgroupPathResolver) -> KeySpace:
    """By cgroup2 id where a cgroup2 tree is visible (or asked for), else by process."""
    by_process = settings.workloads_by == "process" or (settings.workloads_by == "auto" and facts.cgroup_root is None)
    if by_process:
        return ProcessKeys(facts.cgroups, workload_map_size(settings, per_process=True))
    return CgroupKeys(resolver)


@dataclass
class Agent:
    """An agent in this process: the machine's facts, the runtimes' names, what every collector gets, and the
    collectors started."""

    settings: config.Settings
    facts: MachineFacts
    identities: IdentityResolver
    context: CollectorContext
    started: Started
    stats_fd: int | None = None

    @property
    def mode(self) -> str:
        """Where the counts come from: bpf, perf or procfs."""
        return self.started.mode.mode

    def exporter(self, findings: StandingFindings | None = None) -> AgentCollector:
        """The scrape over the running collectors (with the agent's standing findings, when given)."""
        started = self.started
        return AgentCollector(
            started.running,
            started.reasons(),
            self.facts.release,
            lambda: self.stats_fd is not None or bool(kernel.bpf_stats_enabled()),
            self.identities,
            findings,
            mode=self.mode,
            cgroup_paths=self.context.resolver,
            degraded={name: (d.runs_as, d.cause) for name, d in started.degraded.items()},
        )

    def standing_findings(self, every: float = EVALUATE_SECONDS) -> StandingFindings:
        """The agent's standing evaluation of the workloads (the series of metrics.FINDING), judging what it is
        handed at most once every *every* seconds; 0 judges every reading at once."""
        procfs = ProcFS()
        return StandingFindings(
            online_cpu_count(),
            every=every,
            count_workers=census.counter(procfs, self.facts.cgroups.workload_tree),
            node_ticks=node_ticks(procfs),
            clocksource=read_clocksource,
        )

    def counting_problem(self) -> str | None:
        """Why nothing counts the workloads' system calls or scheduling here (neither the syscalls nor the sched
        collector runs), in one line with each reason; None when one of them runs."""
        started = self.started
        if {"syscalls", "sched"} & set(started.running):
            return None
        by_reason: dict[str, list[str]] = {}
        for name, availability in started.unavailable.items():
            reason = availability.reason + (f" (fix: {availability.fix})" if availability.fix else "")
            by_reason.setdefault(reason, []).append(name)
        reasons = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
        return f"no collector can count here in {self.mode} mode ({reasons or 'none enabled'})"


@contextmanager
def open_agent(
    settings: config.Settings,
    *,
    runtimes: bool = True,
    load: bool = True,
    start: bool = True,
    quiet: bool = False,
    silent: bool = False,
) -> Iterator[Agent]:
    """An agent with these settings, closed again at the end: the machine prepared, the runtimes asked in the
    background (unless not *runtimes*), and the collectors of the mode started (only checked unless *load*; none
    unless *start*). The mode chosen is logged unless *silent* (the caller reports it), each collector's outcome
    unless *quiet* too."""
    facts = prepare_machine(settings)
    identities = build_identities(settings) if runtimes else IdentityResolver([])
    if runtimes:
        identities.start()
    stats_fd = enable_stats(settings) if start and load else None
    started = Started(modes.ModeChoice(settings.mode, "no collectors were started"))
    try:
        context = build_context(settings, facts, identities)
        if not (quiet or silent) and not context.keys.per_process and facts.cgroup_root is None:
            log.get_logger("agent").warning(
                "no_cgroup2_tree",
                consequence='every workload is labelled cgroup="(unresolved)"',
                fix="use --workloads-by auto (or process), or pass the host's tree with --cgroup-root",
            )
        if start:
            started = start_collectors(settings, facts, context, load=load, quiet=quiet, silent=silent)
        yield Agent(settings, facts, identities, context, started, stats_fd)
    finally:
        started.close()
        if runtimes:
            identities.stop()
        if stats_fd is not None:
            os.close(stats_fd)


def enable_stats(settings: config.Settings) -> int | None:
    """The fd that keeps the kernel's BPF accounting on (--bpf-stats), or None when not asked for or refused."""
    if not settings.bpf_stats:
        return None
    try:
        return enable_bpf_stats()
    except BpfUnavailable as error:
        log.get_logger("agent").warning("bpf_stats_unavailable", error=str(error))
        return None
