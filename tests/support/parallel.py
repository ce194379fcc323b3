"""How `make test` shares the machine between its test processes (pytest-xdist workers).

Every test module runs whole on one worker, so its module-scoped agents and servers start once. The container
tier is one group: its modules share one Podman service, one containerd and one Docker daemon on fixed paths
(/run/schedwatch-test, /run/podman/podman.sock). A test marked ``machine_wide`` changes the machine for every other
test (it moves the wall clock): it runs last, once every other worker has finished and stopped what it started.

The order in which groups are handed out is the collection order (see :func:`order`): the longest first, so that
no long group starts last and runs alone at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

CONTAINERS = "containers"
MACHINE_WIDE = "machine-wide"
# Longest first (measured, `pytest --durations=0` by module), then each tier in its directory's order; unit last: its
# many short modules fill the workers' last minutes.
FIRST = (
    "tests/containers/",
    "tests/kernel/test_fleet_pool.py",
    "tests/scenarios/",
    "tests/load/",
    "tests/kernel/test_faults.py",
    "tests/kernel/",
    "tests/deploy/",
    "tests/e2e/",
    "tests/unit/",
)


def group(item: pytest.Item) -> str | None:
    """The group an item must share a worker with, beyond its module: None when its module is enough."""
    if item.get_closest_marker("machine_wide") is not None:
        return MACHINE_WIDE
    if item.nodeid.startswith("tests/containers/"):
        return CONTAINERS
    return None


def order(items: list[pytest.Item]) -> None:
    """Sort *items* (stably) by FIRST, machine-wide ones last."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        if group(item) == MACHINE_WIDE:
            return (len(FIRST) + 1, 0)
        for index, prefix in enumerate(FIRST):
            if item.nodeid.startswith(prefix):
                return (index, 0)
        return (len(FIRST), 0)

    items.sort(key=rank)


def mark_groups(items: list[pytest.Item]) -> None:
    """Give items of a shared group xdist's group mark (their node ids then end in ``@group``)."""
    for item in items:
        name = group(item)
        if name is not None:
            item.add_marker(pytest.mark.xdist_group(name))


def scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler of a parallel run: pytest-xdist's group scheduling, by module and by shared group, with the
    machine-wide group held back until it can run alone."""
    from xdist.scheduler import LoadGroupScheduling

    class Scheduling(LoadGroupScheduling):  # type: ignore[misc]
        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False  # keep order()'s

        def _split_scope(self, nodeid: str) -> str:
            if "@" in nodeid.rsplit("]", 1)[-1]:
                return nodeid.rsplit("@", 1)[1]
            return nodeid.split("::", 1)[0]  # the module

        def _assign_work_unit(self, node: Any) -> None:
            waiting = next((scope for scope in self.workqueue if scope != MACHINE_WIDE), None)
            if waiting is not None:
                self.workqueue.move_to_end(waiting, last=False)
                super()._assign_work_unit(node)
                return
            # Only the machine-wide group is left: the first workers to ask stop (their session's fixtures stop
            # with them), the last one waits until they have, then runs it.
            others = [other for other in self.nodes if other is not node]
            if not others:
                super()._assign_work_unit(node)
            elif any(not other.shutting_down for other in others):
                node.shutdown()

        def remove_node(self, node: Any) -> str | None:
            crashed: str | None = super().remove_node(node)
            if self.workqueue:
                for other in self.nodes:
                    self._reschedule(other)
            return crashed

    return Scheduling(config, log)
