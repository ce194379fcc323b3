"""The kernel's CPU list format and the CPUs online."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.machine import cpus
from agent.machine.cpus import parse_cpu_list


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11)),
        ("0-3,6\n", (0, 1, 2, 3, 6)),
        ("0-1\n", (0, 1)),
        ("1", (1,)),
        ("", ()),
        ("\n", ()),
    ],
)
def test_cpu_lists(text: str, expected: tuple[int, ...]) -> None:
    assert parse_cpu_list(text) == expected


@pytest.mark.parametrize("text", ["3-1", "1-", "-1", "x", "0-1,x", "+1", "\u0663", "0-99999999999"])
def test_a_bad_cpu_list_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_online_cpus_come_from_sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    online = tmp_path / "online"
    online.write_text("0-3,6\n")
    monkeypatch.setattr(cpus, "ONLINE", online)
    assert cpus.online_cpus() == (0, 1, 2, 3, 6)
    assert cpus.online_cpu_count() == 5


@pytest.mark.parametrize("text", [None, "", "garbage\n"])
def test_online_cpu_count_falls_back_to_os_cpu_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None
) -> None:
    online = tmp_path / "online"
    if text is not None:
        online.write_text(text)
    monkeypatch.setattr(cpus, "ONLINE", online)
    with pytest.raises(OSError if text is None else ValueError):
        cpus.online_cpus()
    assert cpus.online_cpu_count() == (os.cpu_count() or 1)
