"""The wiring every agent command shares, written once: the machine prepared, the runtimes asked, the collectors of
a mode checked and started (with auto's fallback from BPF to perf counters to /proc).

`run` keeps what it starts; `check` starts and closes at once (or only checks, with ``--no-load``); `diagnose`
reads what it started as a source of series; `verify` prepares the machine the same way before it loads its probes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from agent import config, log
from agent.bpf import BpfUnavailable
from agent.bpf.stats import enable_bpf_stats
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory, modes
from agent.collectors.common.limits import workload_map_size
from agent.counters import SourceUnavailable
from agent.diagnosis.inputs.processes.libraries import file_version
from agent.identity.placement import CgroupKeys, KeySpace, ProcessKeys
from agent.identity.resolver import IdentityResolver
from agent.identity.runtimes import RuntimeClient
from agent.identity.runtimes.containerd import ContainerdClient
from agent.identity.runtimes.cri import CriClient
from agent.identity.runtimes.docker import DockerClient
from agent.machine import kernel
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts, gather

BPF_LOAD_FIX = "if other headers do not help, report it with `schedwatch check --format json`"
COUNTERS_FIX = "give it CAP_PERFMON (or run as root), or use --mode procfs (docs/modes.md)"


def prepare_machine(settings: config.Settings) -> MachineFacts:
    """The facts for these settings (their --cgroup-root and --state-dir), prepared as :func:`prepare` does."""
    return prepare(settings.cgroup_root, settings.state_dir)


def prepare(cgroup_root: Path | None, state_dir: Path) -> MachineFacts:
    """Gather the machine's facts, mounting tracefs and laying out kernel headers for bcc (in *state_dir*) where
    needed. Nothing raises: what could not be prepared is in the facts (no tracefs, headers_error)."""
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
            prepared = kernel.prepare_headers(facts.headers, state_dir)
        except OSError as error:
            return replace(
                facts,
                headers=None,
                headers_error=f"cannot prepare headers in {state_dir}: {error}; pass a writable --state-dir",
            )
        facts = replace(facts, headers=prepared)
    return facts


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
    return CollectorContext(settings, facts, resolver, keys, identities, library_version=pool_library_version())


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


def enabled(mode: str, settings: config.Settings) -> list[CollectorFactory]:
    """The collectors of *mode* that the settings leave on, in the order they start."""
    return [factory for factory in modes.factories(mode) if factory.name in settings.collectors]


@dataclass
class Started:
    """The collectors of one mode: those running, and why each of the others cannot run (with its fix)."""

    mode: modes.ModeChoice
    running: dict[str, Collector]
    unavailable: dict[str, Availability]
    bpf_error: str | None = None  # the first BPF load error, when a BPF collector failed to start

    def reasons(self) -> dict[str, str]:
        """Why each unavailable collector cannot run, by name."""
        return {name: availability.reason for name, availability in self.unavailable.items()}

    def close(self) -> None:
        """Stop every running collector (detach its programs)."""
        close_all(self.running.values())
        self.running = {}


def start_mode(
    mode: modes.ModeChoice,
    settings: config.Settings,
    facts: MachineFacts,
    context: CollectorContext,
    *,
    load: bool,
    quiet: bool = False,
) -> Started:
    """Check each enabled collector of *mode* and, when *load*, start it (logging each outcome unless *quiet*).

    A collector whose check fails or that cannot start is unavailable, with the reason and the fix; nothing raises.
    """
    logger = _Silent() if quiet else log.get_logger("agent")
    started = Started(mode, {}, {})
    for factory in enabled(mode.mode, settings):
        name = factory.name
        availability = factory.check(facts)
        if not availability.ok:
            started.unavailable[name] = availability
            logger.error("collector_unavailable", collector=name, reason=availability.reason, fix=availability.fix)
            continue
        if not load:
            continue
        try:
            started.running[name] = factory.start(context)
            logger.info("collector_started", collector=name, mode=mode.mode)
        except BpfUnavailable as error:
            started.bpf_error = started.bpf_error or str(error)
            started.unavailable[name] = Availability(False, str(error), BPF_LOAD_FIX)
            logger.error("collector_failed_to_start", collector=name, error=str(error))
        except SourceUnavailable as error:
            started.unavailable[name] = Availability(False, str(error), COUNTERS_FIX)
            logger.error("collector_failed_to_start", collector=name, error=str(error))
    return started


def start_collectors(
    settings: config.Settings,
    facts: MachineFacts,
    context: CollectorContext,
    *,
    requested: str | None = None,
    quiet: bool = False,
) -> Started:
    """Choose the mode (*requested*, default --mode) and start its enabled collectors; auto falls back when the BPF
    programs fail to load. What was chosen, and why, is logged once; each collector's outcome too unless *quiet*."""
    requested = requested or settings.mode
    mode = modes.choose(requested, facts)
    started = start_mode(mode, settings, facts, context, load=True, quiet=quiet)
    if requested == "auto" and mode.mode == modes.BPF and started.bpf_error is not None:
        started.close()
        mode = modes.choose(requested, facts, bpf_error=started.bpf_error)
        started = start_mode(mode, settings, facts, context, load=True, quiet=quiet)
    logger = log.get_logger("agent")
    log_method = logger.info if mode.mode == modes.BPF else logger.warning
    log_method("mode", mode=mode.mode, reason=mode.reason, missing=list(mode.missing), fix=mode.fix)
    return started


def enable_stats(settings: config.Settings) -> int | None:
    """The fd that keeps the kernel's BPF accounting on (--bpf-stats), or None when not asked for or refused."""
    if not settings.bpf_stats:
        return None
    try:
        return enable_bpf_stats()
    except BpfUnavailable as error:
        log.get_logger("agent").warning("bpf_stats_unavailable", error=str(error))
        return None


def close_all(running: Iterable[Collector], stats_fd: int | None = None) -> None:
    """Stop *running* collectors, and close the BPF stats fd when given."""
    for collector in running:
        collector.close()
    if stats_fd is not None:
        os.close(stats_fd)


class _Silent:
    """A logger that says nothing: `check` reports outcomes itself."""

    def __getattr__(self, _level: str) -> Callable[..., None]:
        return lambda *_args, **_fields: None
