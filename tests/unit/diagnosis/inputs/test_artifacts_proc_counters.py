"""/proc/stat, /proc/softirqs and /proc/vmstat on real output (public pastes and readings recorded here around
workloads of known behaviour: fixtures/artifacts/README.md), and the observations the rules make of them.

One reading counts since boot and is said to; two readings count the window between them.
"""

from __future__ import annotations

import pytest

from agent.diagnosis.facts import CpuShares, Facts, NodeView, ReclaimCounts, SoftirqCounts
from agent.diagnosis.inputs.artifacts import proc_softirqs, proc_stat, proc_vmstat, read_environment
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.rules import diagnose
from agent.diagnosis.rules.node_counters import MIN_SOFTIRQS, one_cpu_bar
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "artifacts"


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# --- /proc/stat --------------------------------------------------------------------------------------------------


def test_one_reading_gives_shares_since_boot() -> None:
    part = proc_stat.to_facts(proc_stat.parse(read("recorded_proc_stat.txt")), "stat.txt")
    cpu = part.node.cpu
    assert cpu is not None and cpu.since_boot and part.node.cpus == 2
    ticks = {"user": 263871, "nice": 276, "system": 66754, "idle": 209003, "iowait": 1228, "irq": 0,
             "softirq": 1915, "steal": 16733}  # fmt: skip
    total = sum(ticks.values())
    for state, value in ticks.items():
        assert getattr(cpu, state) == pytest.approx(100 * value / total, rel=1e-12), state
    assert part.node.context_switches_per_second is None  # since boot: no window to divide by
    assert any("since boot" in note for note in part.notes)


def test_two_readings_give_the_window_and_switches_per_second() -> None:
    """2 s of a shell loop pinned to CPU 0 between the readings: CPU 0 ran user code 176 of its 201 ticks (other jobs
    of the shared machine took the rest of its time)."""
    report = proc_stat.parse(read("recorded_proc_stat_loop_cpu0.txt"))
    first, last = report.readings
    assert last.cpus[0].user - first.cpus[0].user == 176 and last.cpus[0].total - first.cpus[0].total == 201
    part = proc_stat.to_facts(report, "two.txt")
    cpu = part.node.cpu
    assert cpu is not None and not cpu.since_boot
    delta = {"user": 260, "nice": 13, "system": 48, "idle": 75, "iowait": 0, "irq": 0, "softirq": 1, "steal": 7}
    assert cpu.user == pytest.approx(100 * 260 / 404) and cpu.steal == pytest.approx(100 * 7 / 404)
    assert sum(delta.values()) == 404
    seconds = 404 / (proc_stat.USER_HZ * 2)
    assert part.node.context_switches_per_second == pytest.approx((119_752_052 - 119_739_835) / seconds)


def test_public_proc_stat_pastes() -> None:
    centos = proc_stat.to_facts(proc_stat.parse(read("public_proc_stat_procfs50_centos6_cut.txt")), "c.txt")
    assert centos.node.cpus == 1 and centos.node.cpu is not None
    assert centos.node.cpu.system == pytest.approx(100 * 702 / (547 + 702 + 3574 + 206 + 29 + 3))
    zeros = proc_stat.to_facts(proc_stat.parse(read("public_proc_stat_gvisor1336_zeros.txt")), "g.txt")
    assert zeros.node.cpu is None and zeros.node.cpus == 24  # all 0: no shares rather than a division by 0
    headed = proc_stat.parse(read("public_proc_stat_centreon3979_head_cut.txt"))
    assert headed.skipped == 1 and len(headed.readings[0].cpus) == 8  # `==> /proc/stat <==`


def test_a_cpu_line_cut_short_is_skipped_not_read_as_zeros() -> None:
    text = read("recorded_proc_stat.txt")
    cut = text[: text.index("cpu1") + len("cpu1 132064 128")] + "\n"
    report = proc_stat.parse(cut)
    assert report.cut == 1 and sorted(report.readings[0].cpus) == [0]


# --- /proc/softirqs ----------------------------------------------------------------------------------------------


def test_two_readings_around_a_loopback_flood_from_cpu_1() -> None:
    """udp_flood.py 100000 pinned to CPU 1: each datagram is one NET_RX on the sending CPU."""
    part = proc_softirqs.to_facts(proc_softirqs.parse(read("recorded_proc_softirqs_udp_flood.txt")), "two.txt")
    counts = part.node.softirqs
    assert counts is not None and not counts.since_boot
    assert counts.by_type["NET_RX"] == (0.0, 100_000.0)
    assert counts.by_type["TIMER"] == (20.0, 50.0)


def test_one_reading_counts_since_boot() -> None:
    report = proc_softirqs.parse(read("recorded_proc_softirqs.txt"))
    assert report.cpus == 2 and len(report.readings) == 1 and report.readings[0]["BLOCK"] == (0, 166198)
    counts = proc_softirqs.to_facts(report, "one.txt").node.softirqs
    assert counts is not None and counts.since_boot


def test_softirqs_refuses_proc_interrupts_and_reads_a_cut_row_as_cut() -> None:
    interrupts = "           CPU0       CPU1\n  0:         45          0   IO-APIC   2-edge      timer\nNMI:   0   0\n"
    with pytest.raises(NotThisFormat):
        proc_softirqs.parse(interrupts)
    text = read("recorded_proc_softirqs.txt").rstrip("\n")
    report = proc_softirqs.parse(text[: text.rindex(" ")])  # the last row (RCU) loses its CPU 1 count
    assert report.cut == 1 and "RCU" not in report.readings[0]


# --- /proc/vmstat ------------------------------------------------------------------------------------------------


def test_public_vmstat_since_boot_with_zone_counters_and_cut() -> None:
    sorted_ = proc_vmstat.to_facts(proc_vmstat.parse(read("public_proc_vmstat_collectd1307_sorted_cut.txt")), "s")
    assert sorted_.node.reclaim == ReclaimCounts(
        since_boot=True, allocation_stalls=3_281_736, compaction_stalls=6_559_780, compaction_failures=6_550_462
    )
    zones = proc_vmstat.to_facts(proc_vmstat.parse(read("public_proc_vmstat_oshi1202_cut.txt")), "o")
    assert zones.node.reclaim == ReclaimCounts(since_boot=True, stolen_kswapd=740_824 + 4_281_212, stolen_direct=0)


def test_two_readings_around_a_memory_cgroups_reclaim() -> None:
    """A page-cache churn in a 64 MiB memory cgroup: its reclaim scanned 207,616 file pages (pgscan_file), none of
    which the node counts as kswapd's or direct reclaim (6.18 counts those for global reclaim only)."""
    report = proc_vmstat.parse(read("recorded_proc_vmstat_memcg_churn.txt"))
    first, last = report.readings
    assert last["pgscan_file"] - first["pgscan_file"] == 207_616
    reclaim = proc_vmstat.to_facts(report, "two").node.reclaim
    assert reclaim == ReclaimCounts(False, 0, 0, 0, 0, 0, 0, 0)


def test_vmstat_refuses_cgroup_memory_stat() -> None:
    memory_stat = "anon 1\nfile 2\nkernel_stack 3\npgfault 4\npgscan_kswapd 5\npgsteal_kswapd 6\nnr_free_pages 7\n"
    assert not proc_vmstat.looks_like(memory_stat)


# --- the observations --------------------------------------------------------------------------------------------


def node_facts(node: NodeView) -> Facts:
    return Facts(node=node, workloads=())


def test_reclaim_stalls_are_memory_pressure_never_contention() -> None:
    diagnosis = diagnose(read_environment([FIXTURES / "public_proc_vmstat_collectd1307_sorted_cut.txt"]))
    assert diagnosis.findings == ()
    (observation,) = diagnosis.observations
    assert observation.topic == "memory-reclaim"
    assert "Since boot" in observation.summary and "not thread contention" in observation.summary
    assert [(item.fact, item.value) for item in observation.evidence] == [
        ("allocations stalled in direct reclaim", 3_281_736),
        ("allocations stalled in compaction", 6_559_780),
    ]
    assert any("transparent_hugepage" in step for step in observation.look_next)
    assert any("/proc/vmstat; sleep 10" in step for step in observation.look_next)


def test_no_stall_no_reclaim_observation() -> None:
    quiet = ReclaimCounts(False, scanned_kswapd=5_000, stolen_kswapd=4_000, allocation_stalls=0, compaction_stalls=0)
    assert diagnose(node_facts(NodeView(reclaim=quiet))).observations == ()


def test_a_device_softirq_on_one_cpu_is_named_with_its_window() -> None:
    diagnosis = diagnose(read_environment([FIXTURES / "recorded_proc_softirqs_udp_flood.txt"]))
    (observation,) = diagnosis.observations
    assert observation.topic == "softirqs-on-one-cpu" and "NET_RX" in observation.summary
    assert "between the two readings ran on CPU 1 of 2" in observation.summary
    assert observation.evidence[0].value == 100.0
    assert not any("sleep 10" in step for step in observation.look_next)  # it is a window already


@pytest.mark.parametrize(
    ("per_cpu", "named"),
    [
        ((600.0, 400.0), False),  # 60 % on 2 CPUs: within an uneven but ordinary spread
        ((950.0, 50.0), True),  # 95 % on 2 CPUs: bar 90 %
        ((100.0, 50.0), False),  # too few to tell
        ((5_000.0, 1_000.0, 1_000.0, 1_000.0), True),  # 62.5 % on 4 CPUs: bar 50 %
        ((3_000.0, 2_000.0, 2_000.0, 1_000.0), False),  # 37.5 % on 4 CPUs
    ],
)
def test_the_one_cpu_bar(per_cpu: tuple[float, ...], named: bool) -> None:
    counts = SoftirqCounts(since_boot=False, by_type={"NET_RX": per_cpu})
    observed = diagnose(node_facts(NodeView(softirqs=counts))).observations
    assert bool(observed) == named
    assert one_cpu_bar(2) == 0.9 and one_cpu_bar(4) == 0.5 and one_cpu_bar(3) == pytest.approx(2 / 3)
    assert MIN_SOFTIRQS == 1_000


def test_cpu_shares_since_boot_are_said_to_be() -> None:
    since_boot = CpuShares(user=20, system=30, idle=50, since_boot=True)
    (observation,) = diagnose(node_facts(NodeView(cpu=since_boot))).observations
    assert observation.topic == "system-time-unexplained" and observation.summary.startswith("Since boot")
    window = CpuShares(user=20, system=30, idle=50)
    (observation,) = diagnose(node_facts(NodeView(cpu=window))).observations
    assert observation.summary.startswith("The node spends 30 %")
