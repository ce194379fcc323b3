"""``/proc/PID/status`` (or ``/proc/PID/task/TID/status``), whole or grepped, pasted with ``$ cat`` prompts,
``...`` elisions or a test runner's ``114: `` prefix on every line. From a public post (guevara/read-it-later#11567,
lines cut here)::

    Threads:        5
    Cpus_allowed_list:      0-47
    voluntary_ctxt_switches:        2849002
    nonvoluntary_ctxt_switches:     3008

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> (report.threads, report.cpus_allowed, report.voluntary_switches, report.involuntary_switches)
(5, 48, 2849002, 3008)

Facts (:func:`to_facts`): the process's threads, the CPUs it may run on (``Cpus_allowed_list``), its voluntary and
involuntary context switches. The switches are counted since the thread started (the main thread's only: each
thread has its own file), so they are totals without a window: no rates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, ProcessView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts.errors import Malformed, NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines

__all__ = ["FORMAT", "ProcStatus", "cpu_list", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "/proc/PID/status"

_PREFIX = re.compile(r"^(?:>\s*)?(?:\d+: )?")
_FIELD = re.compile(r"^(?P<key>[A-Za-z_][\w()]*):\s*(?P<value>.*)$")
_KEYS = ("Threads", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", "Cpus_allowed_list", "Tgid", "Pid")


@dataclass(frozen=True)
class ProcStatus:
    """The fields of one status file schedwatch reads (None where the paste does not show them)."""

    name: str | None
    pid: int | None
    threads: int | None
    cpus_allowed: int | None
    affinity: tuple[int, ...]
    voluntary_switches: int | None
    involuntary_switches: int | None
    skipped: int  # prompts, elisions, other files' lines


def cpu_list(text: str) -> tuple[int, ...]:
    """``0-3,8,10-11`` -> (0, 1, 2, 3, 8, 10, 11); raises ValueError for anything else."""
    cpus: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return tuple(cpus)


def _fields(text: str) -> tuple[dict[str, tuple[int, str]], int]:
    found: dict[str, tuple[int, str]] = {}
    skipped = 0
    for line in lines(text):
        clean = _PREFIX.sub("", line.text.strip()).strip()
        if not clean:
            continue
        match = _FIELD.match(clean)
        if match is None:
            skipped += 1
            continue
        found.setdefault(match["key"], (line.number, match["value"].strip()))
    return found, skipped


def looks_like(text: str) -> bool:
    """True when *text* shows a status file's context-switch or Threads and Cpus_allowed_list fields."""
    found, _skipped = _fields(text)
    return (
        "voluntary_ctxt_switches" in found
        or {"Threads", "Cpus_allowed_list"} <= set(found)
        or ({"Threads", "Tgid", "VmRSS"} <= set(found))
    )


def looks_like_error(text: str) -> bool:
    """``cat: /proc/123/status: No such file or directory``."""
    first = next((line.text.strip() for line in lines(text) if line.text.strip()), "")
    return bool(re.match(r"^cat: /proc/\d+/(?:task/\d+/)?status: ", first))


def parse(text: str) -> ProcStatus:
    """The status fields in *text*; raises NotThisFormat or Malformed (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no Threads/Cpus_allowed_list or *_ctxt_switches fields")
    found, skipped = _fields(text)

    def number(key: str) -> int | None:
        if key not in found:
            return None
        line, value = found[key]
        if not value.isdigit():
            raise Malformed(FORMAT, line, f"{key}: not a number: {value!r}")
        return int(value)

    affinity: tuple[int, ...] = ()
    if "Cpus_allowed_list" in found:
        line, value = found["Cpus_allowed_list"]
        try:
            affinity = cpu_list(value)
        except ValueError:
            raise Malformed(FORMAT, line, f"Cpus_allowed_list: not a CPU list: {value!r}") from None
    name = found["Name"][1] if "Name" in found else None
    return ProcStatus(
        name,
        number("Tgid") or number("Pid"),
        number("Threads"),
        len(affinity) if affinity else None,
        affinity,
        number("voluntary_ctxt_switches"),
        number("nonvoluntary_ctxt_switches"),
        skipped,
    )


def to_facts(status: ProcStatus, source: str) -> Part:
    """The process's threads, the CPUs it may use and its context switches (since it started)."""
    processes = None
    if status.pid is not None:
        processes = (ProcessView(status.pid, comm=status.name, threads=status.threads, affinity=status.affinity),)
    workload = WorkloadView(
        ref=Workload(),
        threads=status.threads,
        cpus_allowed=float(status.cpus_allowed) if status.cpus_allowed else None,
        voluntary_switches=status.voluntary_switches,
        involuntary_switches=status.involuntary_switches,
        processes=processes,
    )
    notes = ["/proc/PID/status counts context switches since the thread started, for that thread only: no rate"]
    if status.skipped:
        notes.append(f"{source}: {status.skipped} lines that are not status fields (prompts, elisions) skipped")
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
