"""The system-call family table (agent/machine/syscall_families.py) against the kernel headers of this machine,
the issue's list, and what the BPF program is given; the choice of timed workloads."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.bpf.probes.families import SYSCALL_SLOTS, family_table
from agent.collectors.families import TimedChooser
from agent.machine import syscall_families as table
from tests.support.agent import REPO

X86_64_HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
GENERIC_HEADER = Path("/usr/include/asm-generic/unistd.h")
# arm64's uapi asm/unistd.h asks the generic table for these (arch/arm64/kernel/Makefile.syscalls: renameat,
# newstat, rlimit, memfd_secret; clone3 since 5.3).
ARM64_WANTS = ("RENAMEAT", "NEW_STAT", "SET_GET_RLIMIT", "SYS_CLONE3", "MEMFD_SECRET")

# The families as issue 23 lists them (names as the syscall tables give them).
ISSUE_23 = {
    "yield": ("sched_yield",),
    "futex": ("futex",),
    "clock": ("clock_gettime", "gettimeofday", "time"),
    "sleep": ("nanosleep", "clock_nanosleep"),
    "poll": ("poll", "select", "epoll_wait", "epoll_pwait"),
    "memory": ("mmap", "munmap", "mprotect", "madvise", "brk", "mremap"),
    "process": ("clone", "clone3", "fork", "vfork", "execve", "execveat", "wait4", "waitid"),
}


def header_numbers(path: Path) -> dict[int, str]:
    """`#define __NR_name number` lines of a header: number -> name."""
    found = re.findall(r"^#define __NR_(\w+) (\d+)$", path.read_text(), re.MULTILINE)
    return {int(number): name for name, number in found}


def test_the_issues_families_are_the_tables() -> None:
    assert table.FAMILIES == (
        "yield",
        "futex",
        "clock",
        "sleep",
        "poll",
        "memory",
        "process",
        "file",
        "network",
        "other",
    )
    for family, names in ISSUE_23.items():
        for name in names:
            assert table.family_of(name) == family, name
    assert table.family_of("clock_getres") == table.CLOCK
    assert {table.family_of(name) for name in ("ppoll", "pselect6", "epoll_pwait2")} == {table.POLL}
    assert table.family_of("read") == table.FILE
    assert table.family_of("newfstat") == table.FILE
    assert table.family_of("sendmsg") == table.NETWORK
    assert table.family_of("getppid") == table.OTHER
    assert table.family_of("no_such_call") == table.OTHER


def test_no_syscall_is_in_two_families() -> None:
    listed = [name for names in table.FAMILY_SYSCALLS.values() for name in names]
    assert len(listed) == len(set(listed))
    assert table.OTHER not in table.FAMILY_SYSCALLS


def test_every_listed_name_is_numbered_on_some_architecture() -> None:
    numbered = {name for machine in table.TABLE_NAMES for name in (table.syscall_names(machine) or {}).values()}
    listed = {name for names in table.FAMILY_SYSCALLS.values() for name in names}
    assert sorted(listed - numbered) == []


@pytest.mark.skipif(not X86_64_HEADER.exists(), reason="no x86_64 C library headers here (linux-libc-dev)")
def test_x86_64_numbers_are_the_headers() -> None:
    """Every number the installed header defines is the table's, under the same name (the header is older than
    the table, so the table may go further); numbers the table leaves out are the unimplemented ones."""
    header = header_numbers(X86_64_HEADER)
    numbers = table.TABLE_NAMES["x86_64"]
    unimplemented = {number: name for number, name in header.items() if number not in numbers}
    assert {number: name for number, name in header.items() if number in numbers} == {
        number: numbers[number] for number in header if number in numbers
    }
    assert sorted(unimplemented.values()) == sorted(
        [
            "uselib",
            "_sysctl",
            "create_module",
            "get_kernel_syms",
            "query_module",
            "nfsservctl",
            "getpmsg",
            "putpmsg",
            "afs_syscall",
            "tuxcall",
            "security",
            "set_thread_area",
            "get_thread_area",
            "epoll_ctl_old",
            "epoll_wait_old",
            "vserver",
        ]
    )
    assert max(numbers) > max(header)


@pytest.mark.skipif(
    not GENERIC_HEADER.exists() or shutil.which("gcc") is None, reason="no asm-generic headers or gcc here"
)
def test_aarch64_numbers_are_the_generic_table_as_arm64_builds_it(tmp_path: Path) -> None:
    """The generic table through the C preprocessor with arm64's choices: number -> entry point, and the table's
    tracefs names are the entry points (sys_ dropped)."""
    (tmp_path / "asm").mkdir()
    (tmp_path / "asm" / "bitsperlong.h").write_text("#define __BITS_PER_LONG 64\n")
    source = tmp_path / "arm64.c"
    wants = "".join(f"#define __ARCH_WANT_{want}\n" for want in ARM64_WANTS)
    source.write_text(f"{wants}#define __SYSCALL(nr, call) ROW nr call\n#include <asm-generic/unistd.h>\n")
    done = subprocess.run(
        ["gcc", "-E", "-P", "-nostdinc", f"-I{tmp_path}", "-I/usr/include", str(source)],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = dict(re.findall(r"ROW \(?(\d+)\)? \(?(\w+)\)?", done.stdout))
    entry_points = {int(number): call.removeprefix("sys_") for number, call in rows.items() if call != "sys_ni_syscall"}
    assert len(entry_points) > 290
    names = table.syscall_names("aarch64")
    assert names is not None
    assert {number: names.get(number) for number in entry_points} == entry_points


def test_table_names_turn_into_tracefs_names() -> None:
    assert table.tracefs_name("fstat") == "newfstat"
    assert table.tracefs_name("stat") == "newstat"
    assert table.tracefs_name("umount2") == "umount"
    assert table.tracefs_name("read") == "read"
    assert table.tracefs_name("fadvise64", "aarch64") == "fadvise64_64"
    assert table.tracefs_name("fadvise64", "x86_64") == "fadvise64"


def test_the_program_gets_a_family_for_every_slot() -> None:
    slots = family_table("x86_64")
    assert len(slots) == SYSCALL_SLOTS
    other = 1 + table.FAMILIES.index(table.OTHER)
    assert all(1 <= value <= len(table.FAMILIES) for value in slots)  # 0 would mean "not filled yet"
    assert slots[24] == 1 + table.FAMILIES.index(table.YIELD)  # sched_yield
    assert slots[228] == 1 + table.FAMILIES.index(table.CLOCK)  # clock_gettime
    assert slots[35] == 1 + table.FAMILIES.index(table.SLEEP)  # nanosleep
    assert slots[110] == other  # getppid
    assert slots[1000] == other  # not a syscall number
    assert family_table("aarch64")[113] == 1 + table.FAMILIES.index(table.CLOCK)  # clock_gettime there
    with pytest.raises(Exception, match="no system-call table for riscv64"):
        family_table("riscv64")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_busiest_workloads_are_timed_from_their_second_reading() -> None:
    clock = FakeClock()
    chooser = TimedChooser(2, min_rate=100, clock=clock)
    assert chooser.choose({1: 50, 2: 10_000}) == []  # no rate yet
    clock.now = 10
    # Rates over 10 s: 1 -> 2,000/s, 2 -> 0, 3 (new: all its calls since) -> 500/s, 4 -> 99.9/s.
    assert chooser.choose({1: 20_050, 2: 10_000, 3: 5_000, 4: 999}) == [1, 3]
    clock.now = 20
    # 1 slows to 60/s (timed: stays while >= 50/s), 3 to 10/s (dropped), 5 appears at 300/s.
    assert chooser.choose({1: 20_650, 3: 5_100, 5: 3_000}) == [5, 1]
    clock.now = 30
    assert chooser.choose({1: 20_651, 3: 5_100, 5: 3_000}) == []


def test_no_workload_is_timed_when_the_set_is_empty() -> None:
    clock = FakeClock()
    chooser = TimedChooser(0, clock=clock)
    chooser.choose({1: 0})
    clock.now = 1
    assert chooser.choose({1: 1_000_000}) == []


def test_the_docs_table_is_the_code_table() -> None:

    rows = {}
    for line in (REPO / "docs" / "syscall-families.md").read_text().splitlines():
        if line.startswith("| `"):
            family, calls = (cell.strip() for cell in line.strip("|").split("|"))
            rows[family.strip("`")] = tuple(call.strip("`") for call in calls.split(", ") if call.startswith("`"))
    assert rows == {family: table.FAMILY_SYSCALLS.get(family, ()) for family in table.FAMILIES}
