"""The cgroup_memory collector against workloads of known memory behaviour, each in a cgroup2 directory and (this
host is hybrid) a v1 memory cgroup at the same path: the page faults of a buffer faulted in N times, the limit and
its hits, and the refaults of a file reread under a limit smaller than it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.scenarios.catalog import data_file
from tests.support.agent import AgentProcess
from tests.support.scrape import cgroup_value
from tests.support.workloads import CgroupSandbox, build

MIB = 1 << 20
PAGE = 4096


def finished(binary: Path, *args: object) -> dict[str, Any]:
    """Run a scenario workload (no HOLD argument) to its end; its ground truth (the JSON line it prints)."""
    done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=120, check=True)
    truth: dict[str, Any] = json.loads(done.stdout.splitlines()[0])
    return truth


def memory_group(cgroups: CgroupSandbox, name: str, limit: int | None = None) -> tuple[str, str]:
    """A cgroup2 directory and its v1 memory twin (with *limit* bytes, if given): the workload's argument joining
    both, and the agent's label."""
    unified = cgroups.make(name)
    label = cgroups.relative(unified)
    memory = cgroups.make_v1("memory", label)
    if limit is not None:
        (memory / "memory.limit_in_bytes").write_text(str(limit))
    return f"{unified}:{memory}", label


DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def file_pages_reclaimed() -> int:
    """Pages the kernel has reclaimed since boot that a file's reader could fault back: file pages by any reclaimer
    /proc/vmstat counts (a cgroup's limit, kswapd, direct reclaim), and the pages DAMON's pageout schemes were applied
    to, which vmstat does not count (this development host's DAMON pages out ~1 MiB a second while pgsteal_file stands
    still): an upper bound, as a pageout region may hold anonymous pages too."""
    pages = 0
    for kdamond in DAMON.glob("[0-9]*"):
        if (kdamond / "state").read_text().strip() != "on":
            continue
        (kdamond / "state").write_text("update_schemes_stats")  # the stats files are refreshed on request only
        for scheme in kdamond.glob("contexts/*/schemes/[0-9]*"):
            if (scheme / "action").read_text().strip() == "pageout":
                pages += int((scheme / "stats" / "sz_applied").read_text()) // PAGE
    for line in Path("/proc/vmstat").read_text().splitlines():
        name, value = line.split()
        if name == "pgsteal_file":
            return pages + int(value)
    raise AssertionError("/proc/vmstat has no pgsteal_file: this kernel does not count reclaimed file pages")


def test_each_page_of_a_buffer_mapped_afresh_is_a_page_fault(agent: AgentProcess, cgroups: CgroupSandbox) -> None:
    """20 rounds of a 64 MiB buffer malloc'ed, written and freed in the main thread: glibc maps it afresh each round
    (32 MiB and more always are), so each round faults its 16,384 pages in: 20 x 16,384 minor faults, with the few
    of the workload's own stack and stdio beside them; no major fault, and no limit."""
    rounds, block = 20, 64 * MIB
    dirs, label = memory_group(cgroups, "faults")
    truth = finished(build("alloc_churn"), dirs, 60, 1, block, rounds)
    assert truth["rounds"] == rounds
    scrape = agent.scrape()
    minor = cgroup_value(scrape, "schedwatch_page_faults_total", label, kind="minor")
    major = cgroup_value(scrape, "schedwatch_page_faults_total", label, kind="major")
    pages = rounds * block // PAGE
    assert pages <= minor <= pages + 200, (minor, pages)
    assert major == 0
    assert scrape.value("schedwatch_memory_limit_bytes", cgroup=label, container_id="") is None


def test_a_file_reread_under_a_smaller_limit_hits_it_and_refaults(agent: AgentProcess, cgroups: CgroupSandbox) -> None:
    """A 64 MiB file read for 3 s under a 32 MiB limit: the limit is exported as set, each pass reclaims the last
    one's pages (the v1 failcnt grows: the 'max' event) and reads them back (refaults); under 256 MiB the file fits
    and nothing of it is refaulted."""
    source = data_file(64)
    tight, tight_label = memory_group(cgroups, "reread-tight", 32 * MIB)
    roomy, roomy_label = memory_group(cgroups, "reread-roomy", 256 * MIB)
    tight_truth = finished(build("file_reader"), tight, 3, source)
    # A page of the reader's own binary or libraries that reclaim took any time before (a shadow entry left) comes
    # back as a refault of the first cgroup to touch it again: a short run first makes them resident, so that below
    # only what is reclaimed while the roomy reader runs can refault.
    finished(build("file_reader"), roomy, 0.2, source)
    roomy_refaults_before = cgroup_value(agent.scrape(), "schedwatch_memory_refaults_total", roomy_label)
    reclaimed_before = file_pages_reclaimed()
    roomy_truth = finished(build("file_reader"), roomy, 3, source)
    assert tight_truth["passes"] >= 2 and roomy_truth["passes"] >= 2, (tight_truth, roomy_truth)
    scrape = agent.scrape()
    assert cgroup_value(scrape, "schedwatch_memory_limit_bytes", tight_label) == 32 * MIB
    assert cgroup_value(scrape, "schedwatch_memory_limit_bytes", roomy_label) == 256 * MIB
    hits = cgroup_value(scrape, "schedwatch_memory_events_total", tight_label, event="max")
    assert hits > 0
    refaulted = cgroup_value(scrape, "schedwatch_memory_refaults_total", tight_label)
    # Every pass after the first reads most of the file back: at least the part that cannot stay (64 - 32 MiB).
    assert refaulted >= (tight_truth["passes"] - 1) * (32 * MIB) // PAGE, (refaulted, tight_truth)
    # Under 256 MiB the file stays: a page of it comes back only if reclaim outside the cgroup's limit took it while
    # it ran (the tight workload had ended; a host's proactive reclaim, or memory pressure, may not have).
    outside = file_pages_reclaimed() - reclaimed_before
    roomy_refaults = cgroup_value(scrape, "schedwatch_memory_refaults_total", roomy_label) - roomy_refaults_before
    assert roomy_refaults <= outside, (roomy_refaults, outside)
    assert scrape.value("schedwatch_memory_events_total", cgroup=roomy_label, container_id="", event="max") is None


@pytest.fixture(scope="module", autouse=True)
def _workloads() -> None:
    """Compile the workloads and write the file before any agent reading."""
    for name in ("alloc_churn", "file_reader"):
        build(name)
    data_file(64)
