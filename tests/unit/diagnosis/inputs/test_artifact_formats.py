"""The table of artifact formats is the only dispatch: detection and conversion both read it, every row is its
module's functions, and a row added to it is read by both without another change.

The added row's text is real output: `uptime` (procps-ng 4.0.2) recorded on the development machine.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from agent.diagnosis.facts import Facts, NodeView
from agent.diagnosis.findings import Diagnosis
from agent.diagnosis.inputs import artifacts
from agent.diagnosis.inputs.artifacts import OfflineError, formats, read_environment
from agent.diagnosis.inputs.artifacts.errors import ArtifactError, NotThisFormat
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.render.json_report import to_json
from tests.unit.locations import UNIT_FIXTURES

FIXTURE_DIRS = (UNIT_FIXTURES / "artifacts", UNIT_FIXTURES / "analyze")
FUNCTIONS = ("looks_like", "looks_like_error", "parse", "to_facts")
UPTIME = " 21:55:24 up  2:58,  0 user,  load average: 0.54, 0.65, 0.93\n"


def module_of(row: formats.Format[object]) -> ModuleType:
    return sys.modules[row.parse.__module__]


def saved_report(tmp_path: Path) -> Path:
    facts = read_environment([FIXTURE_DIRS[0] / "gcp_perf_trace_s.txt", FIXTURE_DIRS[0] / "gcp_top.txt"])
    path = tmp_path / "report.json"
    path.write_text(json.dumps(to_json(Diagnosis(facts, (), (), ()))))
    return path


def test_every_row_is_its_modules_functions() -> None:
    assert len({row.name for row in formats.FORMATS}) == len(formats.FORMATS)
    assert len({row.command for row in formats.FORMATS}) == len(formats.FORMATS)
    for row in formats.FORMATS:
        module = module_of(row)
        assert module.__name__.startswith(f"{artifacts.__name__}."), row.name
        assert row.name == module.FORMAT
        for function in FUNCTIONS:
            assert getattr(row, function) is getattr(module, function), (row.name, function)


def test_every_format_module_of_the_package_has_its_row() -> None:
    """A module that reads a format (it has a FORMAT and the functions) but no row would be read by nothing."""
    in_table = {module_of(row) for row in formats.FORMATS}
    for info in pkgutil.iter_modules(artifacts.__path__):
        module = importlib.import_module(f"{artifacts.__name__}.{info.name}")
        if hasattr(module, "FORMAT") or all(hasattr(module, function) for function in FUNCTIONS):
            assert module in in_table, f"{module.__name__} reads a format but has no row in formats.FORMATS"


def test_each_text_is_claimed_by_one_row_only(tmp_path: Path) -> None:
    """So the table's order decides nothing: each fixture (and a saved report) is one row's report or error."""
    texts = {path.name: path.read_text(encoding="utf-8") for folder in FIXTURE_DIRS for path in folder.glob("*.txt")}
    texts["report.json"] = saved_report(tmp_path).read_text()
    assert len(texts) == 173 + 4 + 1
    for name, text in texts.items():
        reports = [row.name for row in formats.FORMATS if row.looks_like(text)]
        errors = [row.name for row in formats.FORMATS if row.looks_like_error(text)]
        claimed = reports or errors
        assert len(claimed) == 1, (name, reports, errors)
        assert formats.detect_format(text).name == claimed[0]
        assert bool(errors and not reports) == name.startswith("error_"), name


def test_the_unknown_format_message_lists_every_rows_command_in_order(tmp_path: Path) -> None:
    message = formats.unknown_format_message("notes.txt")
    places = [message.index(row.command) for row in formats.FORMATS]
    assert places == sorted(places) and "\n" not in message
    assert message.endswith(f"; or {formats.FORMATS[-1].command}")
    notes = tmp_path / "notes.txt"
    notes.write_text("the VM is slow\n")
    with pytest.raises(OfflineError) as raised:
        read_environment([notes])
    assert str(raised.value) == formats.unknown_format_message(str(notes))


def test_the_saved_report_row_gives_whole_facts_the_others_parts(tmp_path: Path) -> None:
    report = saved_report(tmp_path)
    report_row = formats.detect_format(report.read_text())
    assert report_row.name == "schedwatch diagnose --json"
    facts = report_row.to_facts(report_row.parse(report.read_text()), report.name)
    assert isinstance(facts, Facts) and read_environment([report]) == facts
    for row in formats.FORMATS:
        if row is not report_row:
            assert isinstance(row.to_facts(row.parse(sample_of(row)), "sample.txt"), Part), row.name


def sample_of(row: formats.Format[object]) -> str:
    """The first fixture whose report this row claims."""
    for folder in FIXTURE_DIRS:
        for path in sorted(folder.glob("*.txt")):
            text = path.read_text(encoding="utf-8")
            if row.looks_like(text):
                return text
    raise AssertionError(f"no fixture for {row.name}")


# --- a format added as one module and one row ------------------------------------------------------------------


@dataclass(frozen=True)
class Uptime:
    """What `uptime` prints: the time, how long the machine has been up, users, the three load averages."""

    time: str
    up: str
    users: int
    load_average: tuple[float, float, float]


class UptimeRefused(ArtifactError):
    advice = "give the line uptime printed"


class UptimeModule:
    """A format module as the package's are: FORMAT and the four functions."""

    FORMAT = "uptime"
    _LINE = re.compile(
        r" *(?P<time>\d\d:\d\d:\d\d) up +(?P<up>.+?), +(?P<users>\d+) users?, +load average: "
        r"(?P<l1>\d+\.\d+), (?P<l5>\d+\.\d+), (?P<l15>\d+\.\d+)"
    )

    @staticmethod
    def looks_like(text: str) -> bool:
        return " up " in text and "load average:" in text and not text.lstrip().startswith("top - ")

    @staticmethod
    def looks_like_error(text: str) -> bool:
        return text.startswith("uptime: ")

    @staticmethod
    def parse(text: str) -> Uptime:
        if text.startswith("uptime: "):
            raise UptimeRefused(text.strip())
        match = UptimeModule._LINE.fullmatch(text.strip("\n"))
        if match is None:
            raise NotThisFormat("uptime", "no 'HH:MM:SS up ..., load average: ...' line")
        loads = (float(match["l1"]), float(match["l5"]), float(match["l15"]))
        return Uptime(match["time"], match["up"], int(match["users"]), loads)

    @staticmethod
    def to_facts(record: Uptime, source: str) -> Part:
        return Part("uptime", source, NodeView(load_average=record.load_average))


def test_a_new_row_is_read_by_detection_and_conversion(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    saved = tmp_path / "uptime.txt"
    saved.write_text(UPTIME)
    with pytest.raises(OfflineError, match="not output of a tool schedwatch reads"):
        read_environment([saved])  # before the row: no format reads it
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, formats.row(UptimeModule, "uptime")))

    assert formats.detect_format(UPTIME).name == "uptime"
    assert artifacts.parse(UPTIME) == Uptime("21:55:24", "2:58", 0, (0.54, 0.65, 0.93))
    assert "; or uptime" in formats.unknown_format_message()
    facts = read_environment([saved])
    assert facts.node.load_average == (0.54, 0.65, 0.93) and facts.sources == ("uptime uptime.txt",)
    assert facts.workloads == ()
    vmstat = FIXTURE_DIRS[0] / "sick_vmstat.txt"
    merged = read_environment([saved, vmstat])  # merged with the other files like any tool's part
    assert merged.node.load_average == (0.54, 0.65, 0.93)
    assert (
        merged.node.run_queue == read_environment([vmstat]).node.run_queue == (12 + 12 + 16 + 12) / 4
    )  # r of the intervals after the since-boot line

    refused = tmp_path / "refused.txt"
    refused.write_text("uptime: unknown option\n")
    with pytest.raises(OfflineError) as raised:
        read_environment([refused])
    assert str(raised.value) == f"{refused}: uptime: unknown option; give the line uptime printed"
