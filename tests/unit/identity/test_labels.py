"""Label values: whatever a tenant names, they come out valid UTF-8, visible, bounded, and survive the exposition."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from agent.exporter import AgentCollector
from agent.identity.labels import MAX_LABEL_LENGTH, SampleGuard, label_value
from agent.identity.resolver import IdentityResolver
from agent.machine.procfs import decode
from tests.support.exposition import by_agent

HOSTILE = {
    b"bad\xffname": "bad\\xffname",
    b'quote"d': 'quote"d',
    b"back\\slash": "back\\slash",
    b"new\nline": "new\\x0aline",
    b"tab\there": "tab\\x09here",
    b"nul\x00byte": "nul\\x00byte",
    b"del\x7fbell\x07": "del\\x7fbell\\x07",
    "c1\x85next".encode(): "c1\\x85next",
    "bidi\u202eevil".encode(): "bidi\\u202eevil",
    "line\u2028sep".encode(): "line\\u2028sep",
    "été/日本/🐍".encode(): "été/日本/🐍",
    b"\xc3(": "\\xc3(",  # a broken two-byte sequence
}


@pytest.mark.parametrize(("raw", "shown"), list(HOSTILE.items()))
def test_names_come_out_visible_and_valid(raw: bytes, shown: str) -> None:
    value = label_value(decode(raw))
    assert value == shown
    value.encode("utf-8")  # valid UTF-8
    assert value.isprintable()


def test_lone_surrogates_from_a_runtime_answer_are_shown_not_crashed_on() -> None:
    # json.loads('"\\ud800"') gives a lone surrogate that is no escaped byte.
    assert label_value("a\ud800b") == "a\\ud800b"


def test_long_values_keep_their_tail_and_stay_distinct() -> None:
    base = "/x" * 5000 + "/tail.service"
    other = "/y" + base[2:]
    first, second = label_value(base), label_value(other)
    assert len(first) == len(second) == MAX_LABEL_LENGTH
    assert first.endswith("/tail.service") and first.startswith("…")
    assert first != second, "values differing only at the head must stay two label values"
    assert label_value(base) == first, "deterministic"


def test_an_escape_is_never_cut_in_half() -> None:
    value = label_value("\n" * 300)
    assert len(value) <= MAX_LABEL_LENGTH
    tail = value.split("…")[-1]
    assert tail == "\\x0a" * (len(tail) // 4) and len(tail) % 4 == 0


def test_short_values_are_left_alone() -> None:
    for value in ("", "/system.slice/cron.service", "/system.slice/system-getty\\x2dx.slice", "api"):
        assert label_value(value) == value


def family_of(values: list[str]) -> CounterMetricFamily:
    family = CounterMetricFamily("schedwatch_test_calls", "test", labels=["cgroup", "comm"])
    for index, value in enumerate(values):
        family.add_metric([value, f"c{index}"], index + 1)
    return family


def exposition(families: list[Metric]) -> str:
    """What the agent serves for *families*."""
    return by_agent(families)


def test_exposition_round_trip_and_promtool() -> None:
    values = [label_value(decode(raw)) for raw in HOSTILE] + [label_value("/deep" * 3000)]
    text = exposition([family_of(values)])
    parsed = {s.labels["comm"]: s.labels["cgroup"] for f in text_string_to_metric_families(text) for s in f.samples}
    assert [parsed[f"c{i}"] for i in range(len(values))] == values
    promtool = shutil.which("promtool") or shutil.which("promtool", path=str(Path(sys.executable).parent))
    assert promtool, "promtool is missing: run `sudo make test`, which installs it"
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_guard_drops_only_the_bad_sample() -> None:
    good, bad = family_of(["/ok"]), family_of(["/ok", "raw\udcffbytes", "/also-ok"])
    with pytest.raises(UnicodeEncodeError):  # what one unescaped name did to the whole scrape before
        exposition([good, family_of(["raw\udcffbytes"])])
    guard = SampleGuard()
    bad.samples, dropped = guard.keep_valid(bad.samples)
    assert dropped == 1
    text = exposition([bad])
    assert {s.labels["cgroup"] for f in text_string_to_metric_families(text) for s in f.samples} == {"/ok", "/also-ok"}
    too_long = family_of(["x" * 5000])
    assert guard.keep_valid(too_long.samples)[1] == 1


class BrokenCollector:
    """A collector that skipped label_value (cannot happen through the real collectors: that is the point)."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def collect(self) -> list[Metric]:
        return [family_of(self.values)]

    def close(self) -> None:
        pass


def test_agent_serves_every_other_sample_and_counts_the_dropped() -> None:
    collector = AgentCollector(
        {"broken": BrokenCollector(["/ok", "x\udcff"]), "fine": BrokenCollector(["/fine"])},  # type: ignore[dict-item]
        {},
        "test",
        lambda: False,
        IdentityResolver([]),
    )
    for scrape in (1, 2):
        text = exposition(list(collector.collect()))
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        cgroups = {s.labels["cgroup"] for s in samples if s.name == "schedwatch_test_calls_total"}
        assert cgroups == {"/ok", "/fine"}
        dropped = {s.labels["collector"]: s.value for s in samples if s.name == "schedwatch_samples_dropped_total"}
        assert dropped == {"broken": scrape, "fine": 0}
