"""How `make test` shares the machine: two passes.

The first pass runs in parallel (pytest-xdist, each test module whole on one worker) and holds only what no other
process's load can change: the unit tier on fixtures; the VM tier, whose Debian 6.1 kernel under QEMU loads the
programs and counts its own workloads exactly however slowly the host lets it run; the deploy tier (promtool's
rule tests, the manifests, the local stack answering) and the packaging tier (an installed copy finds and loads its
programs), which start no workload and judge no contention. The VM tier is handed out first: it is the longest, and
the other tiers' modules fill the other workers meanwhile.

The second pass runs every test that starts workloads on this machine and judges them, one after another, with
nothing else running: what they measure is CPU contention, so a test running beside them is contention they would
rightly report (a noisy neighbour, a full run queue, a slower pool). Within it the longest tiers come first and a
test marked ``machine_wide`` (it moves the wall clock) last.
"""

from __future__ import annotations

import pytest

# Each pass's tiers, in the order they run: the Makefile's PARALLEL_TIERS and SERIAL_TIERS
# (tests/unit/project/test_test_passes.py holds them equal).
PARALLEL = ("tests/platforms/", "tests/unit/", "tests/deploy/", "tests/e2e/")
SERIAL = ("tests/containers/", "tests/scenarios/", "tests/kernel/", "tests/load/")


def order(items: list[pytest.Item]) -> None:
    """Sort *items* (stably) tier by tier as PARALLEL and SERIAL list them, machine-wide ones last."""
    tiers = (*PARALLEL, *SERIAL)

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("machine_wide") is not None:
            return len(tiers) + 1
        return next((index for index, prefix in enumerate(tiers) if item.nodeid.startswith(prefix)), len(tiers))

    items.sort(key=rank)
