"""Run-queue wait and CPU time per cgroup, summed from each thread's /proc/TID/schedstat at every scrape (no BPF).

Each scrape lists the threads of every cgroup (cgroup.threads, or `tasks` on v1) and reads their schedstat
(field 1: ns on a CPU; field 2: ns waiting on a run queue). A cgroup's totals grow by what its threads added since
the previous scrape; a thread first seen after the first scrape is counted from its start. A thread that exits
between scrapes adds its final values from its taskstats exit record (agent.counters.exit_records); without one
(no netlink, or records dropped) the time since its last scrape is lost, and counted as an unrecorded exit.

At most *max_cgroups* cgroups are read (those with threads, in the order they are first seen; a removed one frees
its place): the threads of the others are not read, so neither the scrape's work nor the series are unbounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.counters.exit_records import ExitRecord, ExitRecords
from agent.machine.cgroups.paths import CgroupPathResolver

RUN, WAIT = 0, 1
VECTOR_WIDTH = 2
UNPLACED = -1  # cgroup key of threads that were born and exited between two scrapes


@dataclass
class _Thread:
    cgroup_id: int
    values: list[int]  # run ns, wait ns at the last scrape
    missed: int = 0  # scrapes since it vanished without an exit record


@dataclass(frozen=True)
class SchedstatSnapshot:
    """Per cgroup id (UNPLACED included once it counted): (path or None, [run ns, wait ns]) since the start."""

    cgroups: dict[int, tuple[str | None, list[int]]]
    exits_unrecorded: int


def parse_schedstat(text: str) -> tuple[int, int] | None:
    """'run_ns wait_ns timeslices' -> (run_ns, wait_ns)."""
    fields = text.split()
    if len(fields) < 2 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    return int(fields[0]), int(fields[1])


class TaskSchedstat:
    """Per-cgroup run and run-queue wait totals of the threads in the cgroups of *tree*."""

    def __init__(
        self, tree: Path, threads_file: str, exits: ExitRecords | None, max_cgroups: int, proc: Path = Path("/proc")
    ) -> None:
        self._resolver = CgroupPathResolver(tree)
        self._max_cgroups = max_cgroups
        self._read_cgroups: set[int] = set()  # the cgroups whose threads are read, within the bound
        self._threads_file = threads_file
        self._exits = exits
        self._proc = proc
        self._threads: dict[int, _Thread] = {}
        self._totals: dict[int, list[int]] = {}
        self._paths: dict[int, str] = {}
        self._started = False
        self._unrecorded = 0

    def read(self) -> SchedstatSnapshot:
        """Scan every cgroup's threads, then apply the exit records received meanwhile."""
        paths = self._resolver.snapshot()
        seen: dict[int, tuple[int, list[int]]] = {}
        self._read_cgroups &= set(paths)
        for cgroup_id, path in paths.items():
            if cgroup_id not in self._read_cgroups and len(self._read_cgroups) >= self._max_cgroups:
                continue
            tids = self._tids(path)
            if tids:
                self._read_cgroups.add(cgroup_id)
            for tid in tids:
                values = self._schedstat(tid)
                if values is not None:
                    seen[tid] = (cgroup_id, values)
        # Records are sent before a thread leaves its cgroup: drained after the scan, every vanished thread's is in.
        records = self._exits.drain() if self._exits is not None else []
        for tid, (cgroup_id, values) in seen.items():
            known = self._threads.get(tid)
            if not self._started:
                base = values
            elif known is None or any(now < then for now, then in zip(values, known.values, strict=True)):
                base = [0, 0]  # new since the last scrape (or a new thread with a reused id)
            else:
                base = known.values
            self._add(cgroup_id, values, base)
            self._threads[tid] = _Thread(cgroup_id, values)
        for record in records:
            self._apply_exit(record)
        for tid in [tid for tid in self._threads if tid not in seen]:
            thread = self._threads[tid]
            thread.missed += 1
            if thread.missed > 1:  # its record would have come by now
                del self._threads[tid]
                self._unrecorded += 1
        self._started = True
        # Paths of the cgroups with totals only: a removed cgroup is reported once more under its last path.
        self._paths = {c: paths.get(c) or self._paths.get(c, "") for c in self._totals if c != UNPLACED}
        cgroups: dict[int, tuple[str | None, list[int]]] = {}
        referenced = {thread.cgroup_id for thread in self._threads.values()}
        for cgroup_id, totals in list(self._totals.items()):
            if cgroup_id in paths or cgroup_id == UNPLACED:
                cgroups[cgroup_id] = (paths.get(cgroup_id), list(totals))
                continue
            cgroups[cgroup_id] = (self._paths.get(cgroup_id) or None, list(totals))
            if cgroup_id not in referenced:  # the table keeps what it counted from here on
                del self._totals[cgroup_id]
                del self._paths[cgroup_id]
        return SchedstatSnapshot(cgroups, self._unrecorded)

    def close(self) -> None:
        """Stop receiving exit records."""
        if self._exits is not None:
            self._exits.close()

    def _apply_exit(self, record: ExitRecord) -> None:
        final = [record.run_ns, record.wait_ns]
        thread = self._threads.pop(record.tid, None)
        if thread is not None:
            self._add(thread.cgroup_id, final, thread.values)
            return
        owner = self._threads.get(record.tgid) if record.tgid else None
        self._add(owner.cgroup_id if owner else UNPLACED, final, [0, 0])

    def _add(self, cgroup_id: int, values: list[int], base: list[int]) -> None:
        totals = self._totals.setdefault(cgroup_id, [0, 0])
        for index in (RUN, WAIT):
            totals[index] += max(0, values[index] - base[index])

    def _tids(self, path: str) -> list[int]:
        try:
            text = (Path(f"{self._resolver.root}{path}") / self._threads_file).read_text()
        except OSError:
            return []
        return [int(word) for word in text.split() if word.isdigit()]

    def _schedstat(self, tid: int) -> list[int] | None:
        try:
            text = (self._proc / str(tid) / "schedstat").read_text()
        except OSError:
            return None
        parsed = parse_schedstat(text)
        return None if parsed is None else list(parsed)
