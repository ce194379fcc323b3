"""A cgroup's CPU files: ``cpu.stat`` (cgroup v2: ``usage_usec``, ``user_usec``, ``system_usec``, ``nr_periods``,
``nr_throttled``, ``throttled_usec``; v1: ``nr_periods``, ``nr_throttled``, ``throttled_time`` in ns) and ``cpu.max``
(``200000 100000``, ``max 100000``), pasted after ``$ cat`` prompts. From a public thread (k0sproject/k0s#4954,
lines cut here)::

    usage_usec 988930037
    user_usec 980846160
    system_usec 8083877
    nr_periods 1197
    nr_throttled 496
    throttled_usec 395384834

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.periods, report.throttled_periods, report.throttled_seconds, report.user_seconds)
(1197, 496, 395.384834, 980.84616)

Of several ``cpu.stat`` blocks in one paste (a pod's and its container's) the last is read. Facts
(:func:`to_facts`): the workload's periods, throttled periods and seconds, user and system seconds, and its CPU
limit from ``cpu.max``. The counters run since the cgroup was made: shares of them are fair, rates are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "CgroupCpu", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "cgroup cpu.stat"

_PAIR = re.compile(r"^(?P<key>[a-z_]+) (?P<value>\d+)$")
_MAX = re.compile(r"^(?P<quota>max|\d+) (?P<period>\d+)$")
_CAT = re.compile(r"(?:^|[\s$#])cat\s+(?P<file>\S+)$")
_KEYS = frozenset({"nr_periods", "nr_throttled", "throttled_usec", "throttled_time"})


@dataclass(frozen=True)
class CgroupCpu:
    """What one cgroup's cpu.stat (and cpu.max) said; None where not shown."""

    periods: int | None
    throttled_periods: int | None
    throttled_seconds: float | None
    user_seconds: float | None
    system_seconds: float | None
    limit_cores: float | None  # from cpu.max; None: "max" or not shown
    blocks: int  # cpu.stat blocks in the paste (the last is read)
    skipped: int


def _blocks(text: str) -> tuple[list[dict[str, int]], tuple[str, str] | None, int]:
    blocks: list[dict[str, int]] = [{}]
    quota: tuple[str, str] | None = None
    skipped = 0
    after_max = False
    for line in lines(text):
        clean = unquoted(line.text)
        if not clean:
            continue
        if (cat := _CAT.search(clean)) is not None:
            after_max = cat["file"].endswith("cpu.max")
            if blocks[-1]:
                blocks.append({})
            continue
        if after_max and (limit := _MAX.match(clean)) is not None:
            quota = (limit["quota"], limit["period"])
            after_max = False
            continue
        pair = _PAIR.match(clean)
        if pair is None:
            skipped += 1
            continue
        if pair["key"] in blocks[-1]:
            blocks.append({})
        blocks[-1][pair["key"]] = int(pair["value"])
    return [block for block in blocks if block], quota, skipped


def looks_like(text: str) -> bool:
    """True when *text* holds a cpu.stat's ``nr_periods`` with ``nr_throttled``."""
    blocks, _quota, _skipped = _blocks(text)
    return any({"nr_periods", "nr_throttled"} <= set(block) for block in blocks)


def looks_like_error(text: str) -> bool:
    """``cat: cpu.stat: No such file or directory``."""
    first = next((unquoted(line.text) for line in lines(text) if line.text.strip()), "")
    return bool(re.match(r"^cat: \S*cpu\.(?:stat|max): ", first)) and not looks_like(text)


def parse(text: str) -> CgroupCpu:
    """The cgroup's CPU counters in *text*; raises NotThisFormat (see .errors)."""
    blocks, quota, skipped = _blocks(text)
    stats = [block for block in blocks if _KEYS & set(block)]
    if not stats:
        raise NotThisFormat(FORMAT, "no nr_periods / nr_throttled lines")
    last = stats[-1]
    throttled = None
    if "throttled_usec" in last:
        throttled = last["throttled_usec"] / 1e6
    elif "throttled_time" in last:
        throttled = last["throttled_time"] / 1e9
    limit = None
    if quota is not None and quota[0] != "max" and int(quota[1]) > 0:
        limit = int(quota[0]) / int(quota[1])
    return CgroupCpu(
        last.get("nr_periods"),
        last.get("nr_throttled"),
        throttled,
        last["user_usec"] / 1e6 if "user_usec" in last else None,
        last["system_usec"] / 1e6 if "system_usec" in last else None,
        limit,
        len(stats),
        skipped,
    )


def to_facts(report: CgroupCpu, source: str) -> Part:
    """The workload's CFS periods and throttling, its CPU time by mode and its limit."""
    cpu = None
    if report.user_seconds is not None and report.system_seconds is not None:
        cpu = report.user_seconds + report.system_seconds
    workload = WorkloadView(
        ref=Workload(),
        periods=report.periods,
        throttled_periods=report.throttled_periods,
        throttled_seconds=report.throttled_seconds,
        user_seconds=report.user_seconds,
        system_seconds=report.system_seconds,
        system_share=report.system_seconds / cpu if cpu and report.system_seconds is not None else None,
        cpu_limit_cores=report.limit_cores,
    )
    notes = ["cpu.stat counts since the cgroup was made: no window, so no rates"]
    if report.blocks > 1:
        notes.append(f"{source}: {report.blocks} cpu.stat blocks (a pod and its containers?): the last is read")
    if report.skipped:
        notes.append(f"{source}: {report.skipped} lines that are not cpu.stat fields (prompts, paths) skipped")
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
