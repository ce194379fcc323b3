"""A metric's name is spelled once, in agent/metrics.py: every other module of agent/ names a metric by its spec
(``metrics.FUTEX_CALLS``, ``metrics.FUTEX_CALLS.name``), in code, strings, help texts, docstrings and comments
alike, so that a rename is one line and no reader can go on reading a name nothing exports."""

from __future__ import annotations

import re
from pathlib import Path

from agent import metrics

AGENT = Path(metrics.__file__).parent
SUFFIXES = ("", "_total", "_sum", "_count", "_bucket")
WORD = re.compile(r"schedwatch_[a-z0-9_]+\*?")


def spelled(text: str) -> list[str]:
    """The metric names (series names, and prefixes of them followed by ``*``) *text* spells."""
    names = {spec.name + suffix for spec in metrics.SPECS for suffix in SUFFIXES}
    found = []
    for word in WORD.findall(text):
        if word.endswith("*"):
            if any(name.startswith(word[:-1]) for name in names):
                found.append(word)
        elif word in names:
            found.append(word)
    return found


def test_no_module_but_metrics_spells_a_metrics_name() -> None:
    spelled_in = {}
    for path in sorted(AGENT.rglob("*.py")):
        if path.name == "metrics.py" and path.parent == AGENT:
            continue
        found = spelled(path.read_text())
        if found:
            spelled_in[str(path.relative_to(AGENT.parent))] = sorted(set(found))
    assert not spelled_in, f"name these metrics by their spec in agent/metrics.py: {spelled_in}"


def test_the_check_finds_names_of_series_and_prefixes_of_them_but_not_other_words() -> None:
    text = (
        'f"{x}" "schedwatch_futex_calls_total" # schedwatch_runqueue_latency_seconds_bucket\n'
        "schedwatch_bpf_program_* schedwatch-verify-1 schedwatch_golden schedwatch_futex_calls_totals"
    )
    assert spelled(text) == [
        "schedwatch_futex_calls_total",
        "schedwatch_runqueue_latency_seconds_bucket",
        "schedwatch_bpf_program_*",
    ]
