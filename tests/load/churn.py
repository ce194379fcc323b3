"""Cgroup churn against the real agent: make N cgroups, yield a known count in each, remove them, repeat.

Each round checks, against ground truth, that every cgroup's yields were counted exactly while it lived and after
it was removed, and that once the series grace period has passed nothing of the round is left: no series, no
entry in the agent's BPF maps. Between rounds it samples what the agent holds (RSS, map entries, series), so a
long run shows whether memory comes back down. Used by `make soak` (an hour of 1,000 cgroups) and by the short
version in `make test`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agent.machine.fdlimit import raise_fd_limit
from tests.support.agent import AgentProcess, agent_map_keys
from tests.support.scrape import Scrape
from tests.support.workloads import CgroupSandbox, Workload

YIELDS = "schedwatch_sched_yield_calls_total"
MAP_ENTRIES = "schedwatch_bpf_map_entries"
WORKLOAD_MAP = "cgroups"  # the per-workload map of each BPF program, as bpftool names it


SETTLE_SECONDS = 2.0


def expected_yields(index: int) -> int:
    """Ground truth of the workload in cgroup *index*: distinct per cgroup, so a swapped count shows."""
    return 1_000 + index


def agent_memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of *pid* in kB, from /proc/PID/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon"):
            fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["RssAnon"]


def yields_by_cgroup(scrape: Scrape, prefix: str) -> dict[str, float]:
    """The yield counter of every cgroup whose path starts with *prefix*, indexed once (a scrape has ~35 k samples)."""
    found: dict[str, float] = {}
    for (name, labels), value in scrape.samples.items():
        if name != YIELDS:
            continue
        cgroup = dict(labels).get("cgroup", "")
        if cgroup.startswith(prefix):
            assert cgroup not in found, f"two yield series for {cgroup}"
            found[cgroup] = value
    return found


def series_under(scrape: Scrape, prefix: str) -> int:
    """How many samples carry a cgroup label under *prefix*."""
    return sum(families_under(scrape, prefix).values())


def families_under(scrape: Scrape, prefix: str) -> Counter[str]:
    """The samples carrying a cgroup label under *prefix*, counted by metric name."""
    return Counter(name for name, labels in scrape.samples if dict(labels).get("cgroup", "").startswith(prefix))


def map_entries(scrape: Scrape) -> dict[str, float]:
    """schedwatch_bpf_map_entries as the agent reports it, keyed "collector/map"; every one must be present."""
    entries = {
        f"{dict(labels)['collector']}/{dict(labels)['map']}": value
        for (name, labels), value in scrape.samples.items()
        if name == MAP_ENTRIES
    }
    assert entries, f"the agent exports no {MAP_ENTRIES}"
    return entries


@dataclass
class Sample:
    """What the agent held at one moment."""

    seconds: float  # since the run started
    phase: str  # "periodic", or where in a round: "live", "removed", "expired"
    round: int
    rss_kb: int
    rss_anon_kb: int
    series: int  # every sample line of the scrape (the machine is shared: includes other users' cgroups)
    series_ours: int  # samples labelled with one of this run's cgroups
    map_entries: dict[str, float]  # as the agent reports them (it recounts at most every 30 s)
    kernel_cgroup_keys: int  # entries of the agent's per-workload maps (both programs), counted now by bpftool
    scrape_seconds: float


@dataclass
class RoundResult:
    """Ground truth against what the agent said, for one round."""

    round: int
    cgroups: int
    yields_expected: int
    yields_seen_live: int
    yields_seen_removed: int
    missing_live: list[str] = field(default_factory=list)
    wrong_live: dict[str, tuple[int, float]] = field(default_factory=dict)
    missing_removed: list[str] = field(default_factory=list)
    wrong_removed: dict[str, tuple[int, float]] = field(default_factory=dict)
    removed_checked: bool = True  # False: no scrape succeeded within the grace period after the removal
    series_left: int = 0
    series_left_by_name: dict[str, int] = field(default_factory=dict)
    map_keys_left: int = 0
    seconds: float = 0.0

    @property
    def lost_nothing(self) -> bool:
        """Every yield counted, live and after removal, and nothing left after the grace period."""
        return not (
            self.missing_live
            or self.wrong_live
            or self.missing_removed
            or self.wrong_removed
            or self.series_left
            or self.map_keys_left
        )

    def problems(self) -> str:
        """A short account of what went wrong (first few of each kind)."""
        parts = []
        for name in ("missing_live", "wrong_live", "missing_removed", "wrong_removed"):
            value = getattr(self, name)
            if value:
                shown = list(value.items())[:5] if isinstance(value, dict) else value[:5]
                parts.append(f"{name}: {len(value)} e.g. {shown}")
        if not self.removed_checked:
            parts.append("counts after removal unchecked: no scrape answered within the grace period")
        if self.series_left:
            parts.append(f"{self.series_left} series left after the grace period ({self.series_left_by_name})")
        if self.map_keys_left:
            parts.append(f"{self.map_keys_left} BPF map keys left after the grace period")
        return f"round {self.round}: " + "; ".join(parts)


class Churn:
    """Rounds of cgroup churn against one running agent, sampling it as they go."""

    def __init__(
        self, agent: AgentProcess, sandbox: CgroupSandbox, yielder: Path, cgroups: int, grace_seconds: float
    ) -> None:
        self.agent = agent
        self.sandbox = sandbox
        self.yielder = yielder
        self.cgroups = cgroups
        self.grace_seconds = grace_seconds
        # Only this run's cgroups: other tests' cgroups in the same sandbox live on (and stall, on a busy machine).
        self.prefix = sandbox.relative(sandbox.base) + "/churn-"
        self.samples: list[Sample] = []
        self.rounds: list[RoundResult] = []
        self.scrape_failures: list[tuple[float, str]] = []  # (seconds since start, error): the agent failed a scrape
        self._started = time.monotonic()
        self._lock = threading.Lock()
        raise_fd_limit()

    def scrape(self, attempts: int = 600) -> tuple[Scrape, float, float]:
        """A scrape, when it began and how long it took; a failed one is recorded and retried a second later (for
        up to 10 min).

        The machine is shared: another user's cgroup can break a scrape (that is a defect of the agent, and the
        run reports it), but it must not end an hour-long run.
        """
        for attempt in range(attempts):
            began = time.monotonic()
            try:
                return self.agent.scrape(), began, time.monotonic() - began
            except OSError as error:
                with self._lock:
                    self.scrape_failures.append((round(began - self._started, 1), repr(error)))
                if attempt == attempts - 1:
                    raise
                time.sleep(1)
        raise AssertionError("unreachable")

    def sample(self, phase: str, round_number: int, settle: float = 0.0) -> Scrape:
        """Scrape the agent, record what it holds (*settle* seconds after the scrape), and return the scrape."""
        return self._sample(phase, round_number, settle)[0]

    def _sample(self, phase: str, round_number: int, settle: float = 0.0) -> tuple[Scrape, Sample]:
        scrape, began, took = self.scrape()
        time.sleep(settle)
        rss, anon = agent_memory_kb(self.agent.process.pid)
        sample = Sample(
            seconds=round(began - self._started, 1),
            phase=phase,
            round=round_number,
            rss_kb=rss,
            rss_anon_kb=anon,
            series=len(scrape.samples),
            series_ours=series_under(scrape, self.prefix),
            map_entries=map_entries(scrape),
            kernel_cgroup_keys=len(agent_map_keys(self.agent, WORKLOAD_MAP)),
            scrape_seconds=round(took, 3),
        )
        with self._lock:
            self.samples.append(sample)
        return scrape, sample

    @contextlib.contextmanager
    def periodic_samples(self, interval: float) -> Iterator[None]:
        """Sample every *interval* seconds in the background while the block runs."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(interval):
                with contextlib.suppress(OSError):  # recorded in scrape_failures; the next sample tries again
                    self.sample("periodic", len(self.rounds) + 1)

        thread = threading.Thread(target=loop, name="sampler", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def run_round(self) -> RoundResult:
        """One round: make, yield in, check, remove, check, wait out the grace period, check nothing is left."""
        number = len(self.rounds) + 1
        began = time.monotonic()
        groups = [self.sandbox.make(f"churn-r{number}-{index}") for index in range(self.cgroups)]
        truth = {self.sandbox.relative(group): expected_yields(index) for index, group in enumerate(groups)}
        cgroup_ids = {group.stat().st_ino for group in groups}  # the kernel's cgroup2 id is the inode number
        workloads = [Workload(self.yielder, group, truth[self.sandbox.relative(group)], 1) for group in groups]
        for workload, group in zip(workloads, groups, strict=True):
            assert workload.truth["yields"] == truth[self.sandbox.relative(group)]
        live = yields_by_cgroup(self.sample("live", number), self.prefix)
        for workload in workloads:
            assert workload.release() == 0
        for group in groups:
            self.sandbox.remove(group)
        removed_at = time.monotonic()
        removed_scrape, removed_sample = self._sample("removed", number)
        removed = yields_by_cgroup(removed_scrape, self.prefix)
        # A removed cgroup's series lasts the grace period: a check made later (the agent failed the scrapes
        # until then) cannot see it, and says so instead of calling the counts lost.
        late = removed_sample.seconds - (removed_at - self._started) > self.grace_seconds
        result = RoundResult(
            round=number,
            cgroups=self.cgroups,
            yields_expected=sum(truth.values()),
            yields_seen_live=int(sum(live.get(path, 0) for path in truth)),
            yields_seen_removed=int(sum(removed.get(path, 0) for path in truth)),
        )
        result.removed_checked = not late
        checks = [(live, result.missing_live, result.wrong_live)]
        if not late:
            checks.append((removed, result.missing_removed, result.wrong_removed))
        for path, expected in truth.items():
            for seen, missing, wrong in checks:
                if path not in seen:
                    missing.append(path)
                elif seen[path] != expected:
                    wrong[path] = (expected, seen[path])
        time.sleep(self.grace_seconds + 1)
        self.scrape()  # the first scrape after the grace period drops the expired series
        # Memory is read once the agent has handed the scrape's freed pages back (within ~1.2 s of a scrape): what
        # it keeps, not the garbage of the scrape in flight.
        expired = self.sample("expired", number, settle=SETTLE_SECONDS)
        result.series_left_by_name = dict(families_under(expired, self.prefix))
        result.series_left = sum(result.series_left_by_name.values())
        result.map_keys_left = len(cgroup_ids & set(agent_map_keys(self.agent, WORKLOAD_MAP)))
        result.seconds = round(time.monotonic() - began, 1)
        self.rounds.append(result)
        return result

    def report(self) -> dict[str, object]:
        """Everything measured so far, as plain data (JSON-ready)."""
        with self._lock:
            samples = [asdict(sample) for sample in self.samples]
        return {
            "cgroups_per_round": self.cgroups,
            "grace_seconds": self.grace_seconds,
            "rounds": [dict(asdict(result), lost_nothing=result.lost_nothing) for result in self.rounds],
            "samples": samples,
            "scrape_failures": list(self.scrape_failures),
        }
