"""The agent's own process_* series: the same families as prometheus_client's ProcessCollector, a cheaper count of
open descriptors."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, ProcessCollector

from agent.exposition import process
from agent.exposition.process import ProcessMetrics, open_descriptors


@pytest.fixture(autouse=True)
def no_collection_between_counts() -> Iterator[None]:
    """A garbage collection between two counts could close a file left open and change the count."""
    gc.disable()
    yield
    gc.enable()


def families(collector: object) -> dict[str, tuple[str, str, float]]:
    return {
        family.name: (family.type, family.documentation, family.samples[0].value)
        for family in collector.collect()  # type: ignore[attr-defined]
    }


def test_the_families_are_prometheus_clients_with_the_same_values() -> None:
    theirs = families(ProcessCollector(registry=CollectorRegistry()))
    ours = families(ProcessMetrics())
    assert {name: kind[:2] for name, kind in ours.items()} == {name: kind[:2] for name, kind in theirs.items()}
    for name in ("process_start_time_seconds", "process_max_fds", "process_virtual_memory_bytes"):
        assert ours[name][2] == pytest.approx(theirs[name][2], rel=0.01), name
    assert ours["process_cpu_seconds"][2] >= theirs["process_cpu_seconds"][2]
    assert ours["process_resident_memory_bytes"][2] == pytest.approx(theirs["process_resident_memory_bytes"][2], 0.05)
    # prometheus_client counts the descriptor its own listing holds; the kernel's count does not.
    assert ours["process_open_fds"][2] == theirs["process_open_fds"][2] - 1


def test_open_descriptors_are_counted_exactly(tmp_path: Path) -> None:
    before = open_descriptors()
    held = [os.open(tmp_path, os.O_RDONLY) for _ in range(500)]
    try:
        assert open_descriptors() == before + 500 == len(os.listdir(process.FD_DIRECTORY)) - 1
    finally:
        for fd in held:
            os.close(fd)
    assert open_descriptors() == before


def test_before_linux_6_2_the_descriptors_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Older kernels report size 0 for /proc/self/fd (this kernel cannot be made to): the listing is counted instead.
    expected = open_descriptors()
    real_stat = os.stat
    monkeypatch.setattr(
        os,
        "stat",
        lambda path, *a, **k: os.stat_result((0,) * 10) if path == process.FD_DIRECTORY else real_stat(path, *a, **k),
    )
    assert open_descriptors() == expected
