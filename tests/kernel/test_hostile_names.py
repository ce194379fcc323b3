"""Whatever a tenant names its cgroups and processes, every scrape answers, and every workload keeps its series.

Ground truth: each workload makes an exact number of sched_yield calls; its series must show exactly that, under
a label value that is valid UTF-8, visible and bounded, next to a well-named neighbour whose series are intact.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import AgentProcess
from tests.support.scrape import Scrape
from tests.support.workloads import CgroupSandbox, build

YIELDS = "schedwatch_sched_yield_calls_total"
PROCESS_YIELDS = "schedwatch_process_sched_yield_calls_total"
MAX_LABEL = 200

# Directory name as the tenant makes it -> how it must be shown in the label (quotes and backslashes stay as they
# are: the exposition escapes them, and the parser gives them back).
HOSTILE_CGROUPS = {
    b"bad\xffname": "bad\\xffname",
    b'say"hi"': 'say"hi"',
    b"back\\slash\\x41": "back\\slash\\x41",
    b"tab\there": "tab\\x09here",
    b"ctl\x01\x1b[31mred": "ctl\\x01\\x1b[31mred",
    b"del\x7fnel\xc2\x85": "del\\x7fnel\\x85",
}
# Process names as the process sets them (prctl PR_SET_NAME) -> the comm label.
HOSTILE_COMMS = {
    b"yi\xffeld\xfe": "yi\\xffeld\\xfe",
    b"two\nlines\n": "two\\x0alines\\x0a",
    b'q"\\\x1b': 'q"\\\\x1b',
}
LONG_COMPONENT = 250  # a single name is limited to 255 bytes: depth makes the long path
LONG_DEPTH = 40


class Tenant:
    """A workload started inside a cgroup reached step by step (so paths longer than PATH_MAX work too)."""

    def __init__(self, binary: Path, directory: list[str], *args: str | int) -> None:
        # Reach the directory one component at a time (no Python runs in the child between fork and exec, which
        # is unsafe with threads); the child starts in it through the descriptor and joins "." (its cgroup).
        fd = os.open(directory[0], os.O_RDONLY | os.O_DIRECTORY)
        try:
            for component in directory[1:]:
                inner = os.open(component, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = inner
            self.process = subprocess.Popen(
                [str(binary), ".", *(str(a) for a in args), "1"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=f"/proc/self/fd/{fd}",
                pass_fds=(fd,),
            )
        finally:
            os.close(fd)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{binary.name} failed with {self.process.wait()}")
        self.truth: dict[str, Any] = json.loads(line)
        self.pid: int = self.truth["pid"]

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def named() -> Path:
    return build("named")


@pytest.fixture
def tenants() -> Iterator[list[Tenant]]:
    started: list[Tenant] = []
    yield started
    for tenant in started:
        tenant.release()


def shown_path(cgroups: CgroupSandbox, group: Path, raw: bytes, shown: str) -> str:
    """The label the agent must give *group*: its path with the tenant's name shown as the rules say."""
    return cgroups.relative(group).replace(os.fsdecode(raw), shown)


def check_every_label(scrape: Scrape) -> None:
    for (name, labels), _ in scrape.samples.items():
        for key, value in labels:
            assert value.isprintable() and len(value) <= MAX_LABEL, f"{name} {key}={value!r}"


def promtool_check(text: str) -> None:
    promtool = shutil.which("promtool") or shutil.which("promtool", path=str(Path(sys.executable).parent))
    assert promtool, "promtool is missing: run `sudo make test`, which installs it"
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def until(agent: AgentProcess, check: Callable[[Scrape], bool], timeout: float = 10.0) -> Scrape:
    """Scrape until *check* holds (each scrape must answer 200 and parse); the last scrape if it never does."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        scrape = agent.scrape()  # raises on anything but 200, and on text that is not UTF-8
        if check(scrape) or time.monotonic() > deadline:
            return scrape
        time.sleep(0.2)


def test_kernel_refuses_newlines_in_cgroup_names(cgroups: CgroupSandbox) -> None:
    # /proc/PID/cgroup is line-based: the kernel keeps newlines out of cgroup names (comm can still hold them).
    with pytest.raises(OSError) as refused:
        (cgroups.base / "new\nline").mkdir()
    assert refused.value.errno == errno.EINVAL


def test_hostile_cgroup_names_keep_every_series(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path, tenants: list[Tenant]
) -> None:
    expected: dict[str, int] = {}
    for index, (raw, shown) in enumerate(HOSTILE_CGROUPS.items()):
        group = cgroups.make(os.fsdecode(raw))
        calls = 1000 + 111 * index
        tenants.append(Tenant(yielder, [str(group)], calls, 1))
        expected[shown_path(cgroups, group, raw, shown)] = calls
    neighbour = cgroups.make("neighbour")
    tenants.append(Tenant(yielder, [str(neighbour)], 4321, 2))
    expected[cgroups.relative(neighbour)] = 8642

    for _ in range(3):  # every scrape answers, not just the first
        scrape = until(agent, lambda s: all(s.value(YIELDS, cgroup=c) == n for c, n in expected.items()))
        for cgroup, calls in expected.items():
            assert scrape.value(YIELDS, cgroup=cgroup, container_id="") == calls, cgroup
        for tenant, cgroup in zip(tenants, expected, strict=True):
            assert scrape.value(PROCESS_YIELDS, pid=str(tenant.pid), cgroup=cgroup) == tenant.truth["yields"]
        check_every_label(scrape)
    promtool_check(scrape.text)


@pytest.fixture
def long_path(cgroups: CgroupSandbox) -> Iterator[list[str]]:
    """A cgroup LONG_DEPTH levels below a fresh one, its path over 10,000 characters; removed deepest first."""
    top = cgroups.make("long")
    components = [f"{level:02d}" + "L" * (LONG_COMPONENT - 2) for level in range(LONG_DEPTH)]
    fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for component in components:
            os.mkdir(component, dir_fd=fds[-1])
            fds.append(os.open(component, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        yield [str(top), *components]
    finally:
        for depth in range(len(fds) - 1, 0, -1):
            os.close(fds[depth])
            cgroups_rmdir(components[depth - 1], fds[depth - 1])
        os.close(fds[0])


def cgroups_rmdir(name: str, dir_fd: int) -> None:
    import time

    deadline = time.monotonic() + 5
    while True:
        try:
            os.rmdir(name, dir_fd=dir_fd)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_path_of_ten_thousand_characters_is_counted_under_a_bounded_label(
    agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path, long_path: list[str], tenants: list[Tenant]
) -> None:
    relative = cgroups.relative(Path(long_path[0])) + "/" + "/".join(long_path[1:])
    assert len(relative) > 10_000
    tenants.append(Tenant(yielder, long_path, 2500, 2))
    neighbour = cgroups.make("neighbour")
    tenants.append(Tenant(yielder, [str(neighbour)], 777, 1))

    def long_series(scrape: Scrape) -> dict[str, float]:
        return {
            dict(labels)["cgroup"]: value
            for labels, value in scrape.find(YIELDS, container_id="").items()
            if dict(labels)["cgroup"].endswith(relative[-150:])
        }

    scrape = until(agent, lambda s: list(long_series(s).values()) == [5000])
    [(label, value)] = long_series(scrape).items()
    assert value == 5000
    assert len(label) == MAX_LABEL and label.startswith("…")
    assert scrape.value(YIELDS, cgroup=cgroups.relative(neighbour), container_id="") == 777
    assert scrape.value(PROCESS_YIELDS, pid=str(tenants[0].pid)) == 5000
    check_every_label(scrape)
    promtool_check(scrape.text)


def test_hostile_process_names_keep_their_series(
    agent: AgentProcess, cgroups: CgroupSandbox, named: Path, tenants: list[Tenant]
) -> None:
    group = cgroups.make("comms")
    wanted: dict[int, str] = {}
    for index, (raw, shown) in enumerate([*HOSTILE_COMMS.items(), (b"neighbour", "neighbour")]):
        tenant = Tenant(named, [str(group)], raw.hex(), 300 + index if shown != "neighbour" else 999)
        tenants.append(tenant)
        wanted[tenant.pid] = shown

    def complete(scrape: Scrape) -> bool:
        return all(scrape.value(PROCESS_YIELDS, pid=str(pid)) is not None for pid in wanted)

    scrape = until(agent, complete)
    for tenant in tenants:
        found = scrape.find(PROCESS_YIELDS, pid=str(tenant.pid))
        assert list(found.values()) == [tenant.truth["yields"]], tenant.pid
        labels = dict(next(iter(found)))
        assert labels["comm"] == wanted[tenant.pid]
        assert labels["cgroup"] == cgroups.relative(group)
    assert scrape.value(YIELDS, cgroup=cgroups.relative(group), container_id="") == 300 + 301 + 302 + 999
    check_every_label(scrape)
    promtool_check(scrape.text)
