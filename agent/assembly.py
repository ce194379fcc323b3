"""The one way to have an agent in this process: :func:`open_agent` prepares the machine, asks the container
runtimes, builds what every collector gets, starts the collectors of the mode, and closes it all again.

`run` serves what it opened; `diagnose` and `top` read it as a source of series; `verify` counts its runs with it;
`check` opens it to see what loads (with ``--no-load``, only what would); `profile` opens it without collectors for
the machine and the workload keys its sampling program needs.

Under --mode auto a BPF collector that BPF does not serve (its program refused by the verifier, say, while the
others load) runs in its perf or procfs form where it has one, or not at all, and says so: logged, exported as
``schedwatch_source_degraded`` and shown by `check`; the other collectors stay BPF. When no BPF collector runs,
the mode itself is perf or procfs, as auto would have chosen without trying.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from agent import config, log
from agent.bpf import BpfUnavailable
from agent.bpf.handover import find_bcc
from agent.bpf.stats import enable_bpf_stats
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory, modes
from agent.collectors.common.availability import load_failure
from agent.collectors.common.limits import workload_map_size
from agent.counters import SourceUnavailable
from agent.diagnosis.inputs.processes.libraries import file_version
from agent.diagnosis.standing import StandingFindings
from agent.exporter import AgentCollector
from agent.identity.placement import CgroupKeys, KeySpace, ProcessKeys
from agent.identity.resolver import IdentityResolver
from agent.identity.runtimes import RuntimeClient
from agent.identity.runtimes.containerd import ContainerdClient
from agent.identity.runtimes.cri import CriClient
from agent.identity.runtimes.docker import DockerClient
from agent.machine import kernel
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import MachineFacts, gather

COUNTERS_FIX = "give it CAP_PERFMON (or run as root), or use --mode procfs (docs/modes.md)"
LOAD_FAILED = "load_failed"  # BPF runs here, but this collector's program did not load (compiler, verifier, attach)
UNSUPPORTED = "unsupported"  # BPF cannot serve this collector here (capabilities, tracefs, bcc, headers, ...)
NOT_RUNNING = "none"  # a degraded collector's form when it has none without BPF


def prepare_machine(settings: config.Settings) -> MachineFacts:
    """The facts for these settings (their --cgroup-root and --state-dir), prepared as :func:`prepare` does."""
    return prepare(settings.cgroup_root, settings.state_dir)


def prepare(cgroup_root: Path | None, state_dir: Path) -> MachineFacts:
    """Gather the machine's facts, mounting tracefs and laying out kernel headers for bcc (in *state_dir*) where
    needed, and whether bcc imports. Nothing raises: what could not be prepared is in the facts (no tracefs,
    headers_error, bcc's error)."""
    logger = log.get_logger("machine")
    if kernel.tracefs_root() is None and kernel.tracefs_denied() is None:
        try:
            root = kernel.mount_tracefs()
            logger.info("tracefs_mounted", path=str(root))
        except OSError as error:
            logger.warning("tracefs_unavailable", error=str(error))
    facts = replace(gather(cgroup_root), bcc=find_bcc())
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


@dataclass(frozen=True)
class Degraded:
    """A collector that --mode auto wanted from BPF and that runs in another form, or not at all: why, and the fix."""

    runs_as: str  # perf, procfs, or NOT_RUNNING
    cause: str  # LOAD_FAILED or UNSUPPORTED
    reason: str  # the loader's or the check's words (the verifier's, when it refused the program)
    fix: str


@dataclass
class Started:
    """The collectors of one mode: those running, the mode whose form each runs in (or would, unloaded), why each of
    the others cannot run (with its fix), and, under --mode auto, those BPF does not serve."""

    mode: modes.ModeChoice
    running: dict[str, Collector] = field(default_factory=dict)
    forms: dict[str, str] = field(default_factory=dict)  # name -> bpf, perf or procfs: the form it runs in
    unavailable: dict[str, Availability] = field(default_factory=dict)
    degraded: dict[str, Degraded] = field(default_factory=dict)
    load_failures: dict[str, BpfUnavailable] = field(default_factory=dict)  # BPF collectors whose program failed

    def reasons(self) -> dict[str, str]:
        """Why each unavailable collector cannot run, by name."""
        return {name: availability.reason for name, availability in self.unavailable.items()}

    def close(self) -> None:
        """Stop every running collector (detach its programs)."""
        close_all(self.running.values())
        self.running = {}


def start_collectors(
    settings: config.Settings,
    facts: MachineFacts,
    context: CollectorContext,
    *,
    load: bool = True,
    quiet: bool = False,
    silent: bool = False,
) -> Started:
    """Choose the mode (--mode) and start its enabled collectors (only check them unless *load*); under auto, each BPF
    collector BPF does not serve falls back to its form without BPF. What was chosen, and why, and each collector
    BPF does not serve, are logged unless *silent*; each collector's outcome too unless *quiet* (or *silent*).
    Nothing raises: what cannot run is in Started, with its fix."""
    logger: Logger = _Silent() if quiet or silent else log.get_logger("agent")
    mode = modes.choose(settings.mode, facts)
    started = _start_mode(mode, settings, facts, context, load, logger)
    if settings.mode == "auto":
        started = _fall_back(started, settings, facts, context, load, logger)
    if not silent:
        _log_mode(started)
    return started


def _log_mode(started: Started) -> None:
    """The mode chosen and why, once; before it, each collector BPF does not serve, and why."""
    agent_log = log.get_logger("agent")
    for name, degraded in started.degraded.items():
        agent_log.warning(
            "collector_degraded",
            collector=name,
            runs_as=degraded.runs_as,
            cause=degraded.cause,
            reason=degraded.reason,
            fix=degraded.fix,
        )
    chosen = started.mode
    log_method = agent_log.info if chosen.mode == modes.BPF and not started.degraded else agent_log.warning
    log_method(
        "mode",
        mode=chosen.mode,
        reason=chosen.reason,
        missing=list(chosen.missing),
        fix=chosen.fix,
        degraded=sorted(started.degraded),
    )


def _start_mode(
    mode: modes.ModeChoice,
    settings: config.Settings,
    facts: MachineFacts,
    context: CollectorContext,
    load: bool,
    logger: Logger,
) -> Started:
    """Check each enabled collector of *mode* and, when *load*, start it; one that cannot is unavailable."""
    started = Started(mode)
    for factory in enabled(mode.mode, settings):
        _start_one(started, factory, mode.mode, facts, context, load, logger)
    return started


def _start_one(
    started: Started,
    factory: CollectorFactory,
    form: str,
    facts: MachineFacts,
    context: CollectorContext,
    load: bool,
    logger: Logger,
) -> None:
    name = factory.name
    availability = factory.check(facts)
    if not availability.ok:
        started.unavailable[name] = availability
        logger.error("collector_unavailable", collector=name, reason=availability.reason, fix=availability.fix)
        return
    if not load:
        started.forms[name] = form
        return
    try:
        started.running[name] = factory.start(context)
    except BpfUnavailable as error:
        started.load_failures[name] = error
        started.unavailable[name] = load_failure(error)
        logger.error("collector_failed_to_start", collector=name, error=str(error), verifier=error.verifier_log)
        return
    except SourceUnavailable as error:
        started.unavailable[name] = Availability(False, str(error), COUNTERS_FIX)
        logger.error("collector_failed_to_start", collector=name, error=str(error))
        return
    started.forms[name] = form
    logger.info("collector_started", collector=name, mode=form)


def _fall_back(
    started: Started,
    settings: config.Settings,
    facts: MachineFacts,
    context: CollectorContext,
    load: bool,
    logger: Logger,
) -> Started:
    """Under --mode auto: each BPF collector BPF does not serve runs in its form without BPF, or not at all."""
    wanted = enabled(modes.BPF, settings)
    if started.mode.mode != modes.BPF:  # BPF cannot run here at all: auto chose without trying
        missed = {factory.name: (factory.check(facts), UNSUPPORTED) for factory in wanted}
        return _degrade(started, missed, started.mode.mode)
    missed = {
        name: (why, LOAD_FAILED if name in started.load_failures else UNSUPPORTED)
        for name, why in started.unavailable.items()
        if name in {factory.name for factory in wanted}
    }
    if not missed:
        return started
    if not any(form == modes.BPF for form in started.forms.values()):  # no program loaded: BPF does not work here
        errors = [str(error) for error in started.load_failures.values()]
        started.close()
        mode = modes.choose("auto", facts, bpf_error=(errors or [next(iter(missed.values()))[0].reason])[0])
        return _degrade(_start_mode(mode, settings, facts, context, load, logger), missed, mode.mode)
    form = modes.without_bpf(facts)
    # A form without BPF never does the work of a collector that runs as BPF (perf's families, say).
    as_bpf = {name for name, runs in started.forms.items() if runs == modes.BPF}
    rest = replace(context, settings=replace(settings, collectors=settings.collectors - as_bpf))
    for factory in enabled(form, settings):
        if factory.name in missed:
            del started.unavailable[factory.name]
            _start_one(started, factory, form, facts, rest, load, logger)
    chosen = started.mode
    started.mode = replace(chosen, reason=f"{chosen.reason}, except for {', '.join(missed)} (degraded)")
    return _degrade(started, missed, form)


def _degrade(started: Started, missed: dict[str, tuple[Availability, str]], form: str) -> Started:
    """Record each missed BPF collector as degraded: to *form* where it runs in it, else to nothing."""
    for name, (why, cause) in missed.items():
        runs_as = form if started.forms.get(name) == form else NOT_RUNNING
        reason = why.reason or started.mode.reason
        started.degraded[name] = Degraded(runs_as, cause, reason, why.fix)
    return started


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


def close_all(running: Iterable[Collector], stats_fd: int | None = None) -> None:
    """Stop *running* collectors, and close the BPF stats fd when given."""
    for collector in running:
        collector.close()
    if stats_fd is not None:
        os.close(stats_fd)


class Logger(Protocol):
    """What starting the collectors logs with: structlog's logger, or :class:`_Silent`."""

    def info(self, event: str, **fields: Any) -> Any:
        """One line at info level."""

    def error(self, event: str, **fields: Any) -> Any:
        """One line at error level."""


class _Silent:
    """A logger that says nothing: its callers report each collector's outcome themselves."""

    def info(self, event: str, **fields: Any) -> None:
        """Nothing."""

    def error(self, event: str, **fields: Any) -> None:
        """Nothing."""
