"""The terminal report: a golden rendering at a pinned width, plain when piped, and names that cannot steer the
terminal or rich's markup."""

from __future__ import annotations

import dataclasses
import io
import os
from typing import Any

import pytest
from rich.console import Console

from agent.diagnosis.render.numbers import number
from agent.diagnosis.render.text import make_console, printable, render_comparison_text, render_text
from tests.unit.diagnosis.report_samples import MADE, healthy_diagnosis, sample_comparison, sample_diagnosis
from tests.unit.locations import UNIT_FIXTURES

GOLDEN = UNIT_FIXTURES / "reports"
WIDTH = 100


def plain(draw: object, *args: object) -> str:
    """What a pipe receives, at the pinned width."""
    out = io.StringIO()
    console = Console(file=out, width=WIDTH, color_system=None, markup=False, highlight=False, emoji=False)
    draw(*args, console)  # type: ignore[operator]
    return out.getvalue()


def golden(name: str, text: str) -> None:
    """*text* must equal the golden file; SCHEDWATCH_UPDATE_GOLDEN=1 rewrites it (then read the diff)."""
    path = GOLDEN / name
    if os.environ.get("SCHEDWATCH_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def with_made(draw: Any) -> Any:
    """*draw* with the samples' fixed provenance (which schedwatch, when)."""
    return lambda report, console: draw(report, console, made=MADE)


def test_diagnosis_tree_golden() -> None:
    golden("sample_diagnosis.txt", plain(with_made(render_text), sample_diagnosis()))


def test_healthy_tree_golden() -> None:
    golden("healthy_diagnosis.txt", plain(with_made(render_text), healthy_diagnosis()))


def test_comparison_golden() -> None:
    golden("sample_comparison.txt", plain(with_made(render_comparison_text), sample_comparison()))


def test_the_sick_workload_is_drawn_first_and_the_tree_goes_top_down() -> None:
    text = plain(render_text, sample_diagnosis())
    order = [
        "inputs: ",
        "finding: thread-pool-oversubscription / yield-storm",
        "fix: Limit",
        "evidence",
        "node: ",
        "[bold red]pwn[/] <script>alert(1)</script>  1 finding",
        "/system.slice/sshd.service",
        "could not check futex-contention",
        "observations",
        "steal:",
        "what these sources cannot tell",
    ]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions)


def test_names_cannot_steer_the_terminal_or_the_markup() -> None:
    out = io.StringIO()
    console = Console(file=out, width=WIDTH, force_terminal=True, color_system="truecolor")
    render_text(sample_diagnosis(), console)
    text = out.getvalue()
    assert "\x1b[31mred" not in text  # the escape a name carried is shown, not sent
    assert "\\x1b[31mred" in text
    assert "[bold red]pwn[/]" in text  # markup in a name is text


def test_piped_output_is_plain() -> None:
    out = io.StringIO()
    render_text(sample_diagnosis(), make_console(file=out, width=WIDTH))
    assert "\x1b[" not in out.getvalue()


def test_no_color_on_a_terminal_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = io.StringIO()
    console = make_console(file=out, width=WIDTH)
    console._force_terminal = True  # a terminal, as far as rich knows
    render_text(sample_diagnosis(), console)
    assert "\x1b[" not in out.getvalue() and "thread-pool-oversubscription" in out.getvalue()


def test_printable_shows_control_characters() -> None:
    assert printable("a\tb\x07c\u200bd é\udc80") == "a\\x09b\\x07c\\u200bd é\\x80"


def test_a_rule_that_could_not_decide_is_not_called_healthy() -> None:
    unsure = dataclasses.replace(sample_diagnosis(), findings=())
    first = plain(render_text, unsure).splitlines()[0]
    assert first == "schedwatch diagnosis  no finding, but 1 rule could not decide: collect what they ask for"
    assert plain(render_text, healthy_diagnosis()).splitlines()[0].endswith("no thread-contention cause in these facts")


def test_numbers_read_as_people_write_them() -> None:
    assert [number(v) for v in (5119771.0, 61.43, 1.97, 0.01234, 4076.68, float("inf"))] == [
        "5,119,771",
        "61.4",
        "1.97",
        "0.0123",
        "4,077",
        "inf",
    ]
