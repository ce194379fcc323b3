"""Perf mode's bookkeeping of cgroups whose counters open late or are refused: the counts stay exact in total, and a
cgroup whose calls went to its ancestor (and that ancestor) are reported as not exact; a refusal with ENOENT is tried
again (issue 31: a Debian 6.1 VM refused a just-made cgroup's counters with ENOENT, for good, and its 54,321 yields
were counted in `/` with nothing saying so).

The kernel's part (perf_event_open and read) is stood in for, and only it: the refusal cannot be made on demand, and
the counts come from a table the test sets. The cgroup tree is a directory tree with the files the counters read.
tests/kernel/test_modes.py counts a cgroup made and used while the agent could not open its counters, for real."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.counters import perf_events, perf_syscalls
from agent.machine.cpus import online_cpus

YIELD = perf_syscalls.CountedEvent(0, "sys_enter_sched_yield")


class FakeKernel:
    """Counters by cgroup directory: each opened counter is a descriptor of /dev/null; reading a group gives the
    directory's count set by the test (its calls and those of the cgroups below it, as the kernel counts)."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.calls: dict[str, int] = {}  # path -> hierarchical count
        self.refuse: dict[str, list[int]] = {}  # path -> errnos of its next opens
        self.opens: dict[str, int] = {}
        self._path_of_fd: dict[int, str] = {}

    def open(self, tracepoint: int, cgroup_fd: int, cpu: int, event_filter: str | None, group_fd: int) -> int:
        path = "/" + str(Path(os.readlink(f"/proc/self/fd/{cgroup_fd}")).relative_to(self.tree)).strip(".")
        path = "/" if path in ("/", "/.") else path.rstrip("/")
        self.opens[path] = self.opens.get(path, 0) + 1
        pending = self.refuse.get(path)
        if pending:
            number = pending.pop(0)
            raise perf_events.PerfEventError(number, f"perf_event_open: {errno.errorcode[number]}")
        fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        self._path_of_fd[fd] = path
        return fd

    def read_group(self, leader: int, members: int) -> list[int]:
        # One CPU of the counters carries all the calls: the others read 0.
        first = min(fd for fd, path in self._path_of_fd.items() if path == self._path_of_fd[leader])
        return [self.calls.get(self._path_of_fd[leader], 0) if leader == first else 0] * members


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKernel]:
    (tmp_path / "cgroup.procs").write_text("")
    fake = FakeKernel(tmp_path)
    monkeypatch.setattr(perf_events, "open_cgroup_counter", fake.open)
    monkeypatch.setattr(perf_events, "read_group", fake.read_group)
    monkeypatch.setattr(perf_syscalls, "counted_events", lambda tracefs, families=False: [(YIELD, 1)])
    monkeypatch.setattr(perf_syscalls, "REQUIRED_EVENTS", ("sys_enter_sched_yield",))
    yield fake


def make(tree: Path, path: str, tasks: str = "", usage_usec: int = 0) -> None:
    directory = tree / path.lstrip("/")
    directory.mkdir()
    (directory / "cgroup.procs").write_text(tasks)
    (directory / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 0\nsystem_usec 0\n")


def counters(kernel: FakeKernel) -> perf_syscalls.PerfSyscallCounters:
    return perf_syscalls.PerfSyscallCounters(kernel.tree, kernel.tree, hierarchical=True, max_cgroups=100)


def by_path(snapshot: perf_syscalls.PerfSnapshot) -> dict[str, tuple[int, bool]]:
    """Each counted cgroup's own yields and whether they are exact."""
    return {
        path: (vector[0], cgroup_id not in snapshot.inexact) for cgroup_id, (path, vector) in snapshot.cgroups.items()
    }


def test_a_cgroup_whose_tasks_ran_before_its_counters_is_not_exact_nor_is_its_ancestor(kernel: FakeKernel) -> None:
    make(kernel.tree, "/pod")
    source = counters(kernel)
    assert by_path(source.read()) == {"/": (0, True), "/pod": (0, True)}
    # /pod/late is made and its task yields 54,321 times before its counters open: the pod's counter has them.
    make(kernel.tree, "/pod/late", tasks="4242\n")
    kernel.calls = {"/": 54_321, "/pod": 54_321}
    # /pod/quiet is made and stays empty until its counters open: nothing of it can be elsewhere.
    make(kernel.tree, "/pod/quiet")
    assert by_path(source.read()) == {
        "/": (0, True),
        "/pod": (54_321, False),
        "/pod/late": (0, False),
        "/pod/quiet": (0, True),
    }
    # From now on the late cgroup's calls are its own; the flag stays (the pod's count still holds the first ones).
    kernel.calls = {"/": 54_421, "/pod": 54_421, "/pod/late": 100}
    assert by_path(source.read())["/pod/late"] == (100, False)


def test_a_cgroup_that_ran_and_emptied_before_its_counters_is_told_by_its_cpu_time(kernel: FakeKernel) -> None:
    source = counters(kernel)
    source.read()
    make(kernel.tree, "/gone-already", usage_usec=1_250)
    assert by_path(source.read()) == {"/": (0, False), "/gone-already": (0, False)}


def test_the_cgroups_there_at_the_first_read_are_exact(kernel: FakeKernel) -> None:
    make(kernel.tree, "/busy", tasks="1\n", usage_usec=10**9)
    assert by_path(counters(kernel).read()) == {"/": (0, True), "/busy": (0, True)}


def test_an_enoent_refusal_is_tried_again_and_said_once(kernel: FakeKernel, capsys: pytest.CaptureFixture[str]) -> None:
    source = counters(kernel)
    source.read()
    make(kernel.tree, "/new", tasks="77\n")
    kernel.refuse["/new"] = [errno.ENOENT, errno.ENOENT]
    kernel.calls = {"/": 500}
    first = source.read()
    assert by_path(first) == {"/": (500, False)}, "its calls are in / meanwhile, and / says so"
    assert first.health.open_failures == {"ENOENT": 1} and first.health.cgroups_uncounted == 1
    second = source.read()
    assert second.health.open_failures == {"ENOENT": 1}, "one refused cgroup, counted once however often tried"
    kernel.calls = {"/": 700, "/new": 200}
    third = source.read()
    assert by_path(third) == {"/": (500, False), "/new": (200, False)}
    assert third.health.cgroups_uncounted == 0
    assert kernel.opens["/new"] == 2 + len(online_cpus()), "refused twice, then one counter per CPU"
    assert capsys.readouterr().out.count("perf_counters_refused") <= 1


def test_another_refusal_stands_while_the_cgroup_exists(kernel: FakeKernel) -> None:
    source = counters(kernel)
    source.read()
    make(kernel.tree, "/denied")
    kernel.refuse["/denied"] = [errno.EACCES]
    source.read()
    source.read()
    assert kernel.opens["/denied"] == 1
    assert by_path(source.read()) == {"/": (0, True)}, "an empty refused cgroup's calls are none yet"


def test_the_watcher_opening_a_cgroup_before_its_task_runs_keeps_it_exact(kernel: FakeKernel) -> None:
    source = counters(kernel)
    source.read()
    make(kernel.tree, "/prompt")
    source.open_path("/prompt")  # as agent.counters.cgroup_watch does when the directory is made
    (kernel.tree / "prompt" / "cgroup.procs").write_text("99\n")
    kernel.calls = {"/": 10, "/prompt": 10}
    assert by_path(source.read()) == {"/": (0, True), "/prompt": (10, True)}


def test_a_cgroup_past_the_bound_marks_the_ancestor_that_counts_its_calls(kernel: FakeKernel) -> None:
    source = perf_syscalls.PerfSyscallCounters(kernel.tree, kernel.tree, hierarchical=True, max_cgroups=2)
    make(kernel.tree, "/pod")
    source.read()
    make(kernel.tree, "/pod/empty")  # past the bound of 2 cgroups, and nothing in it: / and /pod stay exact
    assert by_path(source.read()) == {"/": (0, True), "/pod": (0, True)}
    make(kernel.tree, "/pod/busy", tasks="31\n")  # past the bound too, with a task: its calls are the pod's
    kernel.calls = {"/": 900, "/pod": 900}
    snapshot = source.read()
    assert by_path(snapshot) == {"/": (0, True), "/pod": (900, False)}
    assert snapshot.health.cgroups_uncounted == 2
