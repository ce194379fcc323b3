"""Files (or directories of files) given on the command line -> the facts of one environment."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agent.diagnosis.facts import Facts
from agent.diagnosis.inputs import artifacts
from agent.diagnosis.inputs.artifacts.results import (
    MpstatReport,
    PerfTraceSummary,
    PidstatReport,
    StraceSummary,
    TopReport,
    VmstatReport,
)
from agent.diagnosis.inputs.offline import perf_trace, pidstat, report, strace, sysstat, top
from agent.diagnosis.inputs.offline.merge import merge
from agent.diagnosis.inputs.offline.part import Part

REPORT_FORMAT = "a `schedwatch diagnose --json` report"
RUN_AGAIN = "fix what the tool said and save its report again"
GIVE_WHOLE = "give the tool's whole output, as it printed it"


class OfflineError(Exception):
    """A file cannot be used; the message is the one line a user sees, naming the file and what to do."""


def files_of(paths: Sequence[Path]) -> list[Path]:
    """*paths* with each directory replaced by its files (sorted, hidden ones skipped, not recursive)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(child for child in path.iterdir() if child.is_file() and not child.name.startswith("."))
            if not inside:
                raise OfflineError(f"{path}: an empty directory; give it the saved outputs of perf, strace, top, ...")
            found.extend(inside)
        else:
            found.append(path)
    if not found:
        raise OfflineError("no files given: give the saved outputs of perf trace -s, strace -c, top, ...")
    return found


def _text(path: Path) -> str:
    try:
        return artifacts.read_text(path)
    except artifacts.Unreadable as error:
        raise OfflineError(str(error)) from None


def part_of(artifact: artifacts.Artifact, source: str) -> Part:
    """The facts one parsed artifact tells."""
    if isinstance(artifact, PerfTraceSummary):
        return perf_trace.to_part(artifact, source)
    if isinstance(artifact, StraceSummary):
        return strace.to_part(artifact, source)
    if isinstance(artifact, TopReport):
        return top.to_part(artifact, source)
    if isinstance(artifact, PidstatReport):
        return pidstat.to_part(artifact, source)
    if isinstance(artifact, MpstatReport):
        return sysstat.mpstat_part(artifact, source)
    if isinstance(artifact, VmstatReport):
        return sysstat.vmstat_part(artifact, source)
    raise TypeError(f"no facts for {type(artifact).__name__}")


def read_part(path: Path) -> Part | Facts:
    """One file: the part it tells, or, for a saved schedwatch report, the facts it holds."""
    text = _text(path)
    if report.looks_like(text):
        try:
            return report.facts_from_text(text, str(path))
        except report.ReportError as error:
            raise OfflineError(str(error)) from None
    try:
        artifact = artifacts.parse(text, source=str(path))
    except artifacts.UnknownFormat:
        raise OfflineError(f"{artifacts.unknown_format_message(str(path))}; or {REPORT_FORMAT}") from None
    except artifacts.CommandFailed as error:
        raise OfflineError(f"{path}: {error}; {RUN_AGAIN}") from None
    except artifacts.ArtifactError as error:
        raise OfflineError(f"{path}: {error}; {GIVE_WHOLE}") from None
    return part_of(artifact, path.name)


def read_environment(paths: Sequence[Path]) -> Facts:
    """The facts of one environment from its files: artifacts are merged; a schedwatch report stands alone."""
    read = [(path, read_part(path)) for path in files_of(paths)]
    reports = [(path, item) for path, item in read if isinstance(item, Facts)]
    if reports:
        if len(read) > 1:
            raise OfflineError(
                f"{reports[0][0]}: a schedwatch report is one environment by itself; "
                "give it alone, not with other files"
            )
        return reports[0][1]
    return merge([item for _path, item in read if isinstance(item, Part)])
