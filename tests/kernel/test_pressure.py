"""PSI per workload from a live agent: three CPU-bound threads sharing one CPU stall each other, and the exported
cpu 'some' total is the kernel's own, read between two reads of the cgroup's cpu.pressure."""

from __future__ import annotations

from pathlib import Path

from agent.machine.pressure import parse_pressure
from tests.support.agent import AgentProcess
from tests.support.scrape import cgroup_value
from tests.support.workloads import CgroupSandbox, Workload

WAITING = "schedwatch_pressure_waiting_seconds_total"


def some_seconds(group: Path, resource: str) -> float:
    pressure = parse_pressure((group / f"{resource}.pressure").read_text())
    assert pressure is not None
    return pressure.some_us / 1e6


def test_cpu_pressure_of_a_contended_workload_is_the_kernels(
    agent: AgentProcess, cgroups: CgroupSandbox, spinner: Path
) -> None:
    group = cgroups.make("pressure")
    path = cgroups.relative(group)
    workload = Workload(spinner, group, 3, 1.5, 1)  # 1.5 s of three threads on CPU 1: two wait at any moment
    try:
        before = some_seconds(group, "cpu")
        exported = cgroup_value(agent.scrape(), WAITING, path, resource="cpu")
        after = some_seconds(group, "cpu")
        assert before <= exported <= after, (before, exported, after)
        assert exported > 1.0, "three threads sharing one CPU for 1.5 s: at least one of them waits nearly always"
        memory = cgroup_value(agent.scrape(), WAITING, path, resource="memory")
        assert memory <= some_seconds(group, "memory")
    finally:
        workload.release()


def test_the_nodes_pressure_is_exported(agent: AgentProcess) -> None:
    scrape = agent.scrape()
    for resource in ("cpu", "memory", "io"):
        value = scrape.value("schedwatch_node_pressure_waiting_seconds_total", resource=resource)
        assert value is not None and value >= 0, resource
        text = Path("/proc/pressure", resource).read_text()
        pressure = parse_pressure(text)
        assert pressure is not None and value <= pressure.some_us / 1e6
