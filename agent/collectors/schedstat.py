"""The sched collector in perf and procfs modes: run-queue wait and CPU time per workload from task schedstat.

Without per-wait events there is no run-queue latency histogram and no off-CPU split: this collector exports
the totals it can measure exactly instead (metrics.RUNQUEUE_WAIT_SECONDS, metrics.ONCPU_SECONDS).
"""

from __future__ import annotations

from prometheus_client.core import Metric

from agent import metrics
from agent.collectors import Availability, CollectorContext, CollectorFactory
from agent.counters.cgroup_tree import task_tree
from agent.counters.exit_records import ExitRecords, cpu_mask_text
from agent.counters.schedstat import RUN, VECTOR_WIDTH, WAIT, TaskSchedstat
from agent.identity.workload import REMOVED, workload_for_cgroup
from agent.log import get_logger
from agent.machine.facts import MachineFacts
from agent.machine.procfs import ProcFS
from agent.model import CounterTable

NAME = "sched"
log = get_logger("schedstat")


def check(facts: MachineFacts) -> Availability:
    """Needs a cgroup hierarchy listing threads and /proc/TID/schedstat (CONFIG_SCHED_INFO)."""
    if task_tree(facts.cgroups) is None:
        return Availability(False, "no cgroup hierarchy is mounted", "mount cgroup2 (or the v1 hierarchies)")
    if ProcFS().read_text("self", "schedstat") is None:
        return Availability(
            False,
            "/proc/PID/schedstat is missing: the kernel lacks CONFIG_SCHED_INFO (or CONFIG_SCHEDSTATS)",
            "use a kernel built with CONFIG_SCHED_INFO=y (every major distribution's is)",
        )
    return Availability(True)


class SchedstatCollector:
    """Run-queue wait and on-CPU time per workload, summed over its threads at each scrape."""

    name = NAME

    def __init__(self, context: CollectorContext) -> None:
        tree = task_tree(context.facts.cgroups)
        assert tree is not None  # check() said so
        try:
            exits: ExitRecords | None = ExitRecords(cpu_mask_text())
        except (OSError, ImportError) as error:
            exits = None
            log.warning(
                "taskstats_exit_records_unavailable",
                error=str(error),
                consequence="time of threads that exit between scrapes is missing since their last scrape",
                fix="give the agent CAP_NET_ADMIN and a kernel with CONFIG_TASKSTATS",
            )
        self._identities = context.identities
        self._source = TaskSchedstat(tree[0], tree[1], exits, context.settings.max_cgroups)
        self._table = CounterTable(
            VECTOR_WIDTH, context.settings.series_grace_seconds, keep_forever=frozenset({REMOVED.labels()})
        )

    def collect(self) -> list[Metric]:
        """Scan the threads once and build the families."""
        snapshot = self._source.read()
        self._table.update(
            {
                cgroup_id: (workload_for_cgroup(path, self._identities).labels(), vector)
                for cgroup_id, (path, vector) in snapshot.cgroups.items()
            }
        )
        wait = metrics.RUNQUEUE_WAIT_SECONDS.family()
        oncpu = metrics.ONCPU_SECONDS.family()
        for labels, row in self._table.rows():
            wait.add_metric(labels, row[WAIT] / 1e9)
            oncpu.add_metric(labels, row[RUN] / 1e9)
        unrecorded = metrics.TASK_EXITS_UNRECORDED.family()
        unrecorded.add_metric([], snapshot.exits_unrecorded)
        tracked = metrics.TRACKED_SERIES.family()
        tracked.add_metric([NAME], len(self._table))
        return [wait, oncpu, unrecorded, tracked]

    def close(self) -> None:
        """Stop receiving exit records."""
        self._source.close()


FACTORY = CollectorFactory(
    NAME,
    "run-queue wait and on-CPU time from /proc/TID/schedstat, exits from taskstats (no BPF)",
    check,
    SchedstatCollector,
)
