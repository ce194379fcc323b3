"""The syscalls collector: sched_yield and futex per workload (and per process for the most active), and the call
sites of the yields and futex waits."""

from __future__ import annotations

from prometheus_client.core import Metric

from agent.bpf.probes.syscalls import DEFAULT_CALL_SITES, FUTEX_OPS, REQUIRED_TRACEPOINTS, SyscallProbe, SyscallSnapshot
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.collectors.common.availability import bpf_availability
from agent.collectors.common.bpf_collector import BpfCollector
from agent.collectors.common.call_sites import CallSiteRows, SiteChooser
from agent.collectors.common.limits import probe_limits
from agent.collectors.common.ticker import Ticker
from agent.log import get_logger
from agent.machine.facts import MachineFacts
from agent.symbols.symbolizer import Symbolizer
from agent.tables.syscalls import TABLE

NAME = TABLE.collector
YIELDS = TABLE.layout.slices["yields"]  # in each workload's vector
FUTEX_CALLS = TABLE.layout.slices["futex_calls"]
_WAITS = tuple(FUTEX_OPS.index(op) for op in ("wait", "waitv", "lock_pi"))  # the futex calls whose sites count
EXITED_KEY_FLAG = 1 << 63  # bpf/schedwatch.h: keyed by process, the totals of a process that exited
# Between scrapes the call sites are read and named this often. Every process whose sites are counted has its maps
# captured at its first site (announced by the program), so this read only names what capture missed (a library
# loaded after the first site, more than CAPTURED_PROCESSES new processes since): 1 s read the whole map every second.
SITE_TICK_SECONDS = 5.0
log = get_logger(NAME)


def check(facts: MachineFacts) -> Availability:
    """The collector needs BPF rights, tracefs with the syscall tracepoints, and kernel headers."""
    return bpf_availability(facts, REQUIRED_TRACEPOINTS)


class SyscallsCollector(BpfCollector):
    """sched_yield and futex counts per workload (and per process for the most active): agent/tables/syscalls.py;
    and the call sites of the yields and futex waits of the busiest workloads."""

    name = NAME
    table = TABLE

    def __init__(self, context: CollectorContext, probe: SyscallProbe | None = None) -> None:
        """*probe*: read instead of loading the program (tests hand fixture snapshots in)."""
        settings = context.settings
        if probe is None:
            probe = SyscallProbe(
                probe_limits(settings, context.keys),
                context.facts.tracefs,
                TABLE.layout.vector,
                call_sites=DEFAULT_CALL_SITES if settings.code_workloads > 0 else 0,  # 0: call sites not counted
                site_workloads=settings.code_workloads,
            )
        super().__init__(context, probe)
        self._syscall_probe = probe
        symbolizer = Symbolizer(cache=context.symbol_cache, version_of=context.library_version)
        self.sites = CallSiteRows(
            context.keys,
            context.identities,
            symbolizer,
            settings.code_top_k,
            settings.code_workloads,
            settings.series_grace_seconds,
            probe.forget_call_sites,
        )
        self._sites_ticker = (
            Ticker(NAME, lambda: self._read_sites(settle=False), SITE_TICK_SECONDS) if probe.call_sites else None
        )
        self._site_chooser = SiteChooser(settings.code_workloads)
        # A process is named after it exits if its maps were read (and its files held) when its first site was counted.
        self._symbolizer = symbolizer
        probe.announce_site_processes(symbolizer.capture)

    def _read_sites(self, settle: bool = True) -> None:
        sites = self._syscall_probe.read_call_sites(moved_only=not settle)  # a tick looks at moved sites only
        if sites is not None:
            self.sites.update(sites, settle)

    def snapshot_families(self, snapshot: SyscallSnapshot) -> list[Metric]:
        """Yields and futex waits by call site, per workload (read now, and every tick between scrapes); then the
        workloads whose sites are counted until the next scrape."""
        if self._sites_ticker is None:
            return []
        with self._sites_ticker.lock:
            self._read_sites()
            families = self.sites.families()
        calls = {
            key: vector[YIELDS][0] + sum(vector[FUTEX_CALLS][index] for index in _WAITS)
            for key, vector in snapshot.cgroups.items()
            if key < EXITED_KEY_FLAG
        }
        try:
            self._syscall_probe.choose_site_workloads(self._site_chooser.choose(calls))
        except OSError as error:  # the sites of the workloads chosen last go on being counted
            log.warning(
                "call_sites_not_chosen",
                error=f"writing a BPF map: {error}",
                fix="allow bpf(2) command 2 (BPF_MAP_UPDATE_ELEM) and 3 (BPF_MAP_DELETE_ELEM) in the agent's seccomp "
                "profile; the counts are unaffected",
            )
        return families

    def close(self) -> None:
        """Stop reading call sites, detach the programs, then let the files held for naming go."""
        if self._sites_ticker is not None:
            self._sites_ticker.close()
        super().close()
        self._symbolizer.close()


FACTORY = CollectorFactory(
    NAME, "sched_yield and futex calls, futex wait time (bpf/syscalls.bpf.c)", check, SyscallsCollector
)
