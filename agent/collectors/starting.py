"""Start the collectors of a mode (--mode), and under --mode auto let each BPF collector that BPF does not serve run
in its form without BPF, and say so.

A BPF collector BPF does not serve (its program refused by the verifier while the others load, or its own check
failing) runs in its perf form (the collector of the same name perf mode runs), or its procfs form where perf
counters cannot be opened, or not at all where it has none; it is recorded as :class:`Degraded` with why. When no
BPF collector runs, the mode itself is perf or procfs, as auto would have chosen without trying. Nothing raises:
what cannot run is in :class:`Started`, with its fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agent import config, log
from agent.bpf import BpfUnavailable
from agent.collectors import Availability, Collector, CollectorContext, CollectorFactory, modes
from agent.collectors.common.availability import load_failure
from agent.counters import SourceUnavailable
from agent.machine.facts import MachineFacts

COUNTERS_FIX = "give it CAP_PERFMON (or run as root), or use --mode procfs (docs/modes.md)"
LOAD_FAILED = "load_failed"  # BPF runs here, but this collector's program did not load (compiler, verifier, attach)
UNSUPPORTED = "unsupported"  # BPF cannot serve this collector here (capabilities, tracefs, bcc, headers, ...)
NOT_RUNNING = "none"  # a degraded collector's form when it has none without BPF


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
        for collector in self.running.values():
            collector.close()
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
    starter = _Starter(settings, facts, context, load, logger)
    started = starter.start_mode(modes.choose(settings.mode, facts))
    if settings.mode == "auto":
        started = starter.fall_back(started)
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


@dataclass(frozen=True)
class _Starter:
    """What starting the collectors needs throughout: the settings, this machine's facts, the collectors' context,
    whether to load them (or only check them), and where their outcomes are logged."""

    settings: config.Settings
    facts: MachineFacts
    context: CollectorContext
    load: bool
    logger: Logger

    def start_mode(self, mode: modes.ModeChoice) -> Started:
        """Check each enabled collector of *mode* and, when loading, start it; one that cannot is unavailable."""
        started = Started(mode)
        for factory in enabled(mode.mode, self.settings):
            self.start_one(started, factory, mode.mode)
        return started

    def start_one(self, started: Started, factory: CollectorFactory, form: str) -> None:
        """Check one collector and, when loading, start it in *form*; record what became of it in *started*."""
        name = factory.name
        availability = factory.check(self.facts)
        if not availability.ok:
            started.unavailable[name] = availability
            self.logger.error("collector_unavailable", collector=name, reason=availability.reason, fix=availability.fix)
            return
        if not self.load:
            started.forms[name] = form
            return
        try:
            started.running[name] = factory.start(self.context)
        except BpfUnavailable as error:
            started.load_failures[name] = error
            started.unavailable[name] = load_failure(error)
            self.logger.error(
                "collector_failed_to_start", collector=name, error=str(error), verifier=error.verifier_log
            )
            return
        except SourceUnavailable as error:
            started.unavailable[name] = Availability(False, str(error), COUNTERS_FIX)
            self.logger.error("collector_failed_to_start", collector=name, error=str(error))
            return
        started.forms[name] = form
        self.logger.info("collector_started", collector=name, mode=form)

    def fall_back(self, started: Started) -> Started:
        """Under --mode auto: each BPF collector BPF does not serve runs in its form without BPF, or not at all."""
        settings, facts = self.settings, self.facts
        wanted = [factory for factory in enabled(modes.BPF, settings) if modes.needs_bpf(factory)]
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
            return _degrade(self.start_mode(mode), missed, mode.mode)
        form = modes.without_bpf(facts)
        # A form without BPF never does the work of a collector that runs as BPF (perf's families, say).
        as_bpf = {name for name, runs in started.forms.items() if runs == modes.BPF}
        rest = replace(
            self, context=replace(self.context, settings=replace(settings, collectors=settings.collectors - as_bpf))
        )
        for factory in enabled(form, settings):
            if factory.name in missed:
                del started.unavailable[factory.name]
                rest.start_one(started, factory, form)
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
