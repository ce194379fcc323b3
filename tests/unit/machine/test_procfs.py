"""The one /proc reader: lossless decoding, printable output, vanished processes, fixture roots."""

from __future__ import annotations

import os
from pathlib import Path

from agent.machine.procfs import ProcFS, decode, printable


def test_undecodable_bytes_round_trip_and_print_as_escapes() -> None:
    raw = b"/bars\xffbad/\xc3\xa9t\xc3\xa9"
    text = decode(raw)
    assert os.fsencode(text) == raw
    assert printable(text) == "/bars\\xffbad/été"
    printable(text).encode("utf-8")  # valid UTF-8


def test_printable_leaves_valid_text_alone() -> None:
    assert printable("/kubepods/été") == "/kubepods/été"


def test_fixture_root(tmp_path: Path) -> None:
    (tmp_path / "42" / "task" / "42").mkdir(parents=True)
    (tmp_path / "42" / "task" / "43").mkdir()
    (tmp_path / "42" / "comm").write_bytes(b"py\xfethon\n")
    (tmp_path / "stat").write_text("cpu  1 2 3\n")
    (tmp_path / "self").mkdir()
    proc = ProcFS(tmp_path)
    assert list(proc.pids()) == [42]
    assert sorted(proc.tids(42)) == [42, 43]
    comm = proc.comm(42)
    assert comm is not None and printable(comm) == "py\\xfethon"
    assert proc.read_root_text("stat") == "cpu  1 2 3\n"


def test_gone_process_is_none_not_an_error(tmp_path: Path) -> None:
    proc = ProcFS(tmp_path)
    assert proc.read_text(99999, "cgroup") is None
    assert proc.comm(99999) is None
    assert proc.tids(99999) == []


def test_long_file_is_read_whole_up_to_the_limit(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "maps").write_bytes(b"x" * 200_000)
    proc = ProcFS(tmp_path)
    assert len(proc.read_bytes(7, "maps") or b"") == 200_000
    assert len(proc.read_bytes(7, "maps", limit=100_000) or b"") == 100_000


def test_reads_this_process() -> None:
    proc = ProcFS()
    assert proc.read_text(os.getpid(), "status") is not None
    assert os.getpid() in set(proc.pids())


def test_comm_keeps_a_newline_of_its_own(tmp_path: Path) -> None:
    # prctl(PR_SET_NAME, "two\nlines\n"): the kernel adds one newline of its own, and only that one goes.
    (tmp_path / "5").mkdir()
    (tmp_path / "5" / "comm").write_bytes(b"two\nlines\n\n")
    assert ProcFS(tmp_path).comm(5) == "two\nlines\n"


def test_lone_surrogates_that_are_no_byte_are_shown_too() -> None:
    assert printable("a\ud800b\udcffc") == "a\\ud800b\\xffc"
