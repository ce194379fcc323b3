"""`schedwatch check`: what this machine allows and which collectors can run, gathered into one report first, then
written as text or JSON (both say the same things; JSON is what a bug report should carry).

Exit status: 0 when every enabled collector of the judged mode can run and `run` would accept the serving flags, 1
otherwise. In auto and bpf modes the collectors judged are the BPF ones (exit 1 when BPF cannot run, whatever auto
falls back to); in perf and procfs modes, that mode's own. It takes every flag of `run` and checks them as `run`
would (the TLS files are loaded, basic auth must be complete). Run without root, it reports what it can see and
marks what it could not check, and why.
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent import __version__, assembly, config, metrics
from agent.bpf.compile import BCC_INSTALL_FIX, BCC_UPGRADE_FIX
from agent.collectors import Availability, modes, registry, starting
from agent.collectors.common.availability import tracefs_availability
from agent.commands import Command
from agent.commands.agent_flags import add_agent_arguments, settings_from
from agent.commands.output import to_stdout
from agent.commands.parser import CommandParser, Example
from agent.identity.runtimes import socket_absent
from agent.machine import kernel, taskstats
from agent.machine.facts import BccFound, MachineFacts
from agent.web import tls_context

SCHEMA = "schedwatch.check/v1"
NAME_WIDTH = max(len(name) for name in registry())  # the collectors table's first column, wide enough for each
FUTEX2_SYSCALLS = ("futex_waitv", "futex_wait", "futex_wake", "futex_requeue")
NEEDS_TRACEFS = "not checked: tracefs is readable by root only here (run it as root, e.g. with sudo)"


@dataclass(frozen=True)
class CollectorCheck:
    """One collector of a mode: can it run, and if not why and what to do."""

    name: str
    description: str
    ok: bool
    reason: str = ""
    fix: str = ""


@dataclass(frozen=True)
class WebCheck:
    """How `run` would serve /metrics with these flags, or why it would refuse them."""

    listen: str  # HOST:PORT
    tls: bool
    basic_auth_user: str  # "": no basic auth
    max_connections: int
    timeout_seconds: float
    problem: str = ""  # why `run` would stop at start with these settings; "" when none


@dataclass(frozen=True)
class CheckReport:
    """Everything `check` says, gathered before anything is written."""

    version: str
    facts: MachineFacts
    workloads_by: str  # "cgroup" or "process"
    workloads: str  # how workloads are keyed and placed here, in words (with the fix when it cannot work)
    futex2: tuple[str, ...] | None  # futex2 syscalls this kernel has; None: not checked
    sched_switch_blocked_mask: int | None  # from the tracepoint format; None: unreadable or not checked
    delay_accounting: bool | None  # kernel.task_delayacct; None: the kernel has no such sysctl
    runtimes: dict[str, str]  # socket path -> listening, missing, or why it cannot be reached
    mode_requested: str
    mode: modes.ModeChoice
    collectors: tuple[CollectorCheck, ...]  # of the judged mode (BPF in auto and bpf modes)
    mode_collectors: tuple[CollectorCheck, ...]  # counting in another form than the judged mode's (auto's fallback)
    loaded: bool  # the collectors were compiled and loaded once (not --no-load)
    web: WebCheck
    not_checked: dict[str, str] = field(default_factory=dict)  # what could not be looked at, and why
    degraded: dict[str, starting.Degraded] = field(default_factory=dict)  # auto: collectors BPF does not serve

    @property
    def ok(self) -> bool:
        """Every enabled collector of the judged mode can run, and `run` would accept the serving flags."""
        return all(collector.ok for collector in self.collectors) and not self.web.problem


def gather_report(settings: config.Settings, load: bool) -> CheckReport:
    """Look at the machine, and (when *load*) compile and load each collector's program once, closing it again."""
    with assembly.open_agent(settings, runtimes=False, load=load, silent=True) as agent:
        facts, started, per_process = agent.facts, agent.started, agent.context.keys.per_process
    judged = modes.BPF if settings.mode in ("auto", modes.BPF) else settings.mode
    not_checked: dict[str, str] = {}
    futex2: tuple[str, ...] | None = None
    mask = None
    if facts.tracefs is None and facts.tracefs_denied is not None:
        not_checked["futex2"] = not_checked["sched_switch"] = NEEDS_TRACEFS
    else:
        futex2 = tuple(name for name in FUTEX2_SYSCALLS if kernel.has_tracepoint("syscalls", f"sys_enter_{name}"))
        mask = kernel.sched_switch_blocked_mask(facts.tracefs)
    return CheckReport(
        version=__version__,
        facts=facts,
        workloads_by="process" if per_process else "cgroup",
        workloads=_workloads_text(facts, per_process),
        futex2=futex2,
        sched_switch_blocked_mask=mask,
        delay_accounting=taskstats.delay_accounting_enabled(),
        runtimes=runtime_sockets(settings),
        mode_requested=settings.mode,
        mode=started.mode,
        collectors=collector_checks(judged, settings, started),
        mode_collectors=_fallback_checks(judged, settings, started),
        degraded=started.degraded,
        loaded=load,
        web=web_check(settings),
        not_checked=not_checked,
    )


def web_check(settings: config.Settings) -> WebCheck:
    """The serving flags checked as `run` checks them before it listens: TLS files that load, basic auth complete."""
    host = f"[{settings.listen_host}]" if ":" in settings.listen_host else settings.listen_host
    problem = ""
    tls = False
    try:
        tls_files, _auth = config.web_security(settings)
        if tls_files is not None:
            tls_context(*tls_files)
            tls = True
    except config.ConfigError as error:
        problem = str(error)
    except ssl.SSLError as error:
        problem = (
            f"the TLS certificate and key do not load ({error.reason or error}): give a PEM certificate in "
            "--web.tls-cert-file and its key in --web.tls-key-file"
        )
    except OSError as error:
        problem = f"cannot read {error.filename}: {error.strerror}"
    return WebCheck(
        f"{host}:{settings.listen_port}",
        tls,
        settings.basic_auth_user,
        settings.web_max_connections,
        settings.web_timeout,
        problem,
    )


def collector_checks(mode: str, settings: config.Settings, started: starting.Started) -> tuple[CollectorCheck, ...]:
    """Each enabled collector of *mode*: ok when it runs (or would) in that mode's form, else why not."""
    checks = []
    for factory in starting.enabled(mode, settings):
        name = factory.name
        form = started.forms.get(name)
        if form == mode or (form is not None and not modes.needs_bpf(factory)):  # the cgroup files' run in any mode
            result = Availability(True)
        elif name in started.degraded:
            degraded = started.degraded[name]
            result = Availability(False, degraded.reason, degraded.fix)
        else:
            result = started.unavailable.get(name, Availability(False, f"not started in {started.mode.mode} mode"))
        checks.append(CollectorCheck(name, factory.description, result.ok, result.reason, result.fix))
    return tuple(checks)


def _fallback_checks(judged: str, settings: config.Settings, started: starting.Started) -> tuple[CollectorCheck, ...]:
    """The collectors that count in another form than the judged mode's: those of the mode auto fell back to, or
    each BPF collector running in its form without BPF."""
    if started.mode.mode != judged:
        return collector_checks(started.mode.mode, settings, started)
    checks = []
    for name, degraded in started.degraded.items():
        if degraded.runs_as != starting.NOT_RUNNING:
            form = next(f for f in starting.enabled(degraded.runs_as, settings) if f.name == name)
            checks.append(CollectorCheck(name, form.description, True))
    return tuple(checks)


def _workloads_text(facts: MachineFacts, per_process: bool) -> str:
    if per_process:
        return "by process, placed by /proc/PID/cgroup" + (
            " (no cgroup2 tree here)" if facts.cgroup_root is None else " (asked for with --workloads-by)"
        )
    if facts.cgroup_root is None:
        return (
            'by cgroup2 id, but no cgroup2 tree is visible: every workload would be "(unresolved)" — '
            "use --workloads-by auto (or process), or pass the host's tree with --cgroup-root"
        )
    return "by cgroup2 id, placed in the cgroup2 tree"


def runtime_sockets(settings: config.Settings) -> dict[str, str]:
    """Each configured runtime socket: 'listening', 'missing' or why it cannot be reached."""
    sockets = list(dict.fromkeys([*settings.docker_sockets, *settings.kubelet_docker_sockets, *settings.cri_sockets]))
    if settings.containerd_socket and settings.containerd_socket not in sockets:
        sockets.append(settings.containerd_socket)
    return {str(path): _socket_state(path, settings.runtime_timeout) for path in sockets}


def _socket_state(path: Path, timeout: float) -> str:
    try:
        absent = socket_absent(path)
    except PermissionError:
        return f"not checked: no permission to look in {path.parent} (run it as root, e.g. with sudo)"
    if absent:
        return "missing (containers are labelled by id only)"
    with socket.socket(socket.AF_UNIX) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(str(path))
        except PermissionError:
            return (
                "not reachable: permission denied (without CAP_DAC_OVERRIDE the agent needs search permission on "
                f"each directory above the socket: chmod o+x {path.parent}, or mount the socket file itself)"
            )
        except OSError as error:
            return f"not reachable: {error.strerror or error}"
    return "listening"


def to_json(report: CheckReport) -> dict[str, Any]:
    """The report as JSON (schema ``schedwatch.check/v1``): every fact the text states, as values."""
    facts = report.facts
    document: dict[str, Any] = {"schema": SCHEMA, "version": report.version}
    document["machine"] = _plain(asdict(facts)) | {
        "cgroups": {
            "mode": facts.cgroups.mode,
            "unified": _plain(facts.cgroups.unified),
            "v1": _plain(facts.cgroups.v1),
        }
    }
    document |= {
        "workloads_by": report.workloads_by,
        "workloads": report.workloads,
        "futex2": None if report.futex2 is None else list(report.futex2),
        "sched_switch_blocked_mask": report.sched_switch_blocked_mask,
        "delay_accounting": report.delay_accounting,
        "runtimes": report.runtimes,
        "mode": asdict(report.mode) | {"requested": report.mode_requested},
        "collectors": {check.name: asdict(check) for check in report.collectors},
        "mode_collectors": {check.name: asdict(check) for check in report.mode_collectors},
        "degraded": {name: asdict(degraded) for name, degraded in report.degraded.items()},
        "loaded": report.loaded,
        "web": asdict(report.web),
        "not_checked": report.not_checked,
        "ok": report.ok,
    }
    return document


def _plain(value: Any) -> Any:
    """Paths as strings, tuples as lists, inside dicts and lists."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _yes(flag: bool | None) -> str:
    return {True: "yes", False: "no", None: "unknown"}[flag]


def to_text(report: CheckReport) -> str:
    """The report for a person: the machine's facts, the mode, then the collectors."""
    facts = report.facts
    caps = ", ".join(f"{name} {_yes(value)}" for name, value in facts.capabilities.items())
    if facts.headers is None:
        headers = f"MISSING: {facts.headers_error}"
    else:
        headers = f"{facts.headers.source}: {facts.headers.path} ({facts.headers.detail})"
    layout = facts.cgroups
    cgroups = f"{layout.mode}; cgroup2 at {layout.unified or 'not mounted'}"
    if layout.v1:
        cgroups += f"; v1 controllers {', '.join(sorted(layout.v1))}"
    if facts.bpf_stats:
        stats = "on"
    else:
        stats = (
            f"off — for {metrics.shown(metrics.BPF_PROGRAM_RUNS, metrics.BPF_PROGRAM_RUN_SECONDS)} run with "
            "--bpf-stats (needs CAP_SYS_ADMIN) or sysctl -w kernel.bpf_stats_enabled=1"
        )
    tracefs_state = tracefs_availability(facts)
    if tracefs_state.ok:
        tracefs = str(facts.tracefs)
    elif facts.tracefs_denied is not None:
        tracefs = f"{facts.tracefs_denied}: mounted, readable by root only — fix: {tracefs_state.fix}"
    else:
        tracefs = f"NOT MOUNTED: {tracefs_state.fix}"
    futex2 = report.not_checked.get("futex2") or ", ".join(report.futex2 or ()) or "none (futex(2) only)"
    mask = report.sched_switch_blocked_mask
    prev_state = report.not_checked.get("sched_switch") or (
        f"blocked when prev_state & {mask:#x} (read from the tracepoint format)"
        if mask is not None
        else "format unreadable: assuming prev_state & 0xff means blocked (Linux >= 4.14)"
    )
    delayacct = {
        True: "on",
        False: "off (sysctl -w kernel.task_delayacct=1 to cross-check run-queue wait)",
        None: "not in this kernel",
    }[report.delay_accounting]
    lines = [
        f"schedwatch {report.version} check",
        f"  kernel       {facts.release} (BTF {_yes(facts.btf)})",
        f"  privileges   {caps}" + ("" if facts.is_root else " (not root)"),
        f"  tracefs      {tracefs}",
        f"  headers      {headers}",
        f"  bcc          {_bcc_text(facts.bcc)}",
        f"  cgroups      {cgroups}",
        f"  workloads    {report.workloads}",
        f"  bpf stats    {stats}",
        f"  futex2       {futex2}",
        f"  sched_switch {prev_state}",
        f"  delayacct    {delayacct}",
        *(f"  runtime      {path}: {state}" for path, state in report.runtimes.items()),
        f"  web          {_web_text(report.web)}",
        *_mode_lines(report),
        "collectors",
        *(_collector_line(check, f"  {check.name:<{NAME_WIDTH}} ", "ok    ") for check in report.collectors),
    ]
    return "\n".join(lines)


def _bcc_text(bcc: BccFound | None) -> str:
    if bcc is None:
        return "not looked for"
    if bcc.version is None:
        return f"CANNOT BE IMPORTED: {bcc.error} — fix: {BCC_INSTALL_FIX}"
    if bcc.error:
        return f"TOO OLD: {bcc.error}; it is at {bcc.path} — fix: {BCC_UPGRADE_FIX}"
    where = (
        " (outside this Python's own path: found in the distribution's packages, where the loader looks too)"
        if bcc.outside_path
        else ""
    )
    return f"{bcc.version} from {bcc.path}{where}"


def _web_text(web: WebCheck) -> str:
    if web.problem:
        return f"CANNOT SERVE: {web.problem}"
    auth = f"basic auth as {web.basic_auth_user}" if web.basic_auth_user else "no basic auth"
    return (
        f"{'https' if web.tls else 'http'} on {web.listen}{' (its certificate and key load)' if web.tls else ''}, "
        f"{auth}, at most {web.max_connections} connections, {web.timeout_seconds:g} s timeout"
    )


def _mode_lines(report: CheckReport) -> list[str]:
    mode = report.mode
    lines = [f"  mode         {mode.mode} (--mode {report.mode_requested}): {mode.reason}"]
    lines += [f"  mode lacks   {what}" for what in mode.missing]
    if mode.fix:
        lines.append(f"  mode fix     {mode.fix}")
    lines += [_collector_line(check, f"  mode runs    {check.name} ", "ok: ") for check in report.mode_collectors]
    lines += [_degraded_line(name, degraded) for name, degraded in report.degraded.items()]
    return lines


_CAUSES = {starting.LOAD_FAILED: "its BPF program did not load", starting.UNSUPPORTED: "BPF cannot serve it here"}


def _degraded_line(name: str, degraded: starting.Degraded) -> str:
    runs = "does not run" if degraded.runs_as == starting.NOT_RUNNING else f"runs in its {degraded.runs_as} form"
    return f"  degraded     {name} {runs} ({_CAUSES[degraded.cause]}): {degraded.reason}"


def _collector_line(check: CollectorCheck, head: str, ok: str) -> str:
    if check.ok:
        return f"{head}{ok}{check.description}"
    return f"{head}CANNOT RUN: {check.reason} — fix: {check.fix}"


def add_arguments(parser: CommandParser) -> None:
    """--json and --no-load; the agent's flags (checked as `run` would) in --help-all."""
    own = parser.add_argument_group("what to check and how to say it")
    own.add_argument(
        "--no-load", action="store_true", help="only inspect the machine; do not compile and load the probes"
    )
    own.add_argument(
        "--json", dest="format", action="store_const", const="json", default="text", help="print the report as JSON"
    )
    own.add_argument("--format", choices=("text", "json"), help=argparse.SUPPRESS)  # the older spelling of --json
    add_agent_arguments(parser)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Gather, print, and exit 1 when an enabled collector of the judged mode cannot run."""
    settings = settings_from(args, parser)
    report = gather_report(settings, load=not args.no_load)
    if args.format == "json":
        to_stdout(lambda: print(json.dumps(to_json(report), indent=2)))
    else:
        to_stdout(lambda: print(to_text(report)))
    return 0 if report.ok else 1


COMMAND = Command(
    name="check",
    help="what this machine allows and which collectors can run here",
    description="Report what this machine allows (kernel, privileges, tracefs, headers, cgroups, runtimes) and "
    "which collectors can run, with the fix for each that cannot; exit 1 when an enabled one cannot. Takes every "
    "flag of run and checks it as run would. docs/security.md, docs/modes.md.",
    add_arguments=add_arguments,
    run=run,
    examples=(
        Example("sudo schedwatch check", "as root: compiles and loads each program once"),
        Example("schedwatch check --no-load --json", "inspect only; JSON for a bug report"),
        Example("sudo schedwatch check --mode perf", "could perf mode count here?"),
    ),
)
