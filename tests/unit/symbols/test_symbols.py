"""Addresses to names: library file names, /proc/PID/maps, ELF symbol tables (checked against nm on a program compiled
here and against the C library this process runs), kallsyms."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.machine.procfs import ProcFS
from agent.symbols import symbolizer
from agent.symbols.elf_symbols import SymbolCache, read_build_id, read_functions
from agent.symbols.kernel_symbols import parse_kallsyms
from agent.symbols.names import UNKNOWN, is_c_library, library_name
from agent.symbols.process_maps import VDSO, parse_maps
from agent.symbols.symbolizer import MAPS_REFRESH_ROUNDS, Symbolizer, own_vdso
from tests.support.workloads import Workload, build

MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1311 /work/code_sites
55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:01 1311 /work/code_sites
7f0e00000000-7f0e00021000 rw-p 00000000 00:00 0
7f0e1c228000-7f0e1c3a6000 r-xp 00028000 fe:01 2230 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd5bd5e000-7ffd5bd60000 r-xp 00000000 00:00 0                          [vdso]
"""


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/x/numpy.libs/libscipy_openblas64_-32a4b2a6.so", "libscipy_openblas64_.so"),
        ("/x/numpy.libs/libopenblas64_p-r0-0cf96a72.3.23.dev.so", "libopenblas64_p-r0.3.23.dev.so"),
        ("/x/numpy.libs/libgfortran-040039e1-0352e75f.so.5.0.0", "libgfortran.so.5.0.0"),
        ("/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0", "libgomp.so.1.0.0"),
        ("/usr/bin/python3.11 (deleted)", "python3.11"),
    ],
)
def test_library_names_drop_wheel_hashes(path: str, name: str) -> None:
    assert library_name(path) == name


def test_c_library_names() -> None:
    assert is_c_library("libc.so.6") and is_c_library("libpthread.so.0") and is_c_library("ld-musl-x86_64.so.1")
    assert not is_c_library("libcrypto.so.3")


def test_maps_keep_executable_file_mappings_and_the_vdso() -> None:
    maps = parse_maps(MAPS)
    assert len(maps) == 3
    mapping = maps.find(0x7F0E1C228000 + 0x10)
    assert mapping is not None and mapping.path.endswith("libc.so.6") and mapping.inode == 2230
    assert mapping.file_offset(0x7F0E1C228000 + 0x10) == 0x28010
    assert mapping.device == (0xFE, 0x01)
    vdso = maps.find(0x7FFD5BD5E010)
    assert vdso is not None and vdso.path == "[vdso]"
    assert maps.find(0x7F0E00000010) is None  # anonymous


def nm_functions(binary: Path) -> dict[str, tuple[int, int]]:
    """name -> (address, size) of the defined text symbols nm lists."""
    nm = shutil.which("nm")
    assert nm is not None, "nm is missing: apt-get install binutils"
    out = subprocess.run([nm, "-S", "--defined-only", str(binary)], capture_output=True, text=True, check=True)
    found = {}
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tT":
            found[fields[3]] = (int(fields[0], 16), int(fields[1], 16))
    return found


def test_functions_of_a_compiled_program_agree_with_nm() -> None:
    binary = build("code_sites")
    with binary.open("rb") as file:
        functions = read_functions(file)
    assert functions is not None
    expected = nm_functions(binary)
    for name in ("yield_from_alpha", "yield_from_beta", "wait_from_gamma", "wait_inline_delta", "main"):
        address, size = expected[name]
        # A PIE's text segment: file offset = address - segment address + segment offset (0x1000 each here).
        offset = _file_offset(binary, address)
        assert functions.function_at(offset) == name
        assert functions.function_at(offset + size - 1) == name
        assert functions.function_at(offset + size) != name


def _file_offset(binary: Path, address: int) -> int:
    readelf = shutil.which("readelf")
    assert readelf is not None
    out = subprocess.run([readelf, "-lW", str(binary)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD":
            offset, vaddr, filesz = int(fields[1], 16), int(fields[2], 16), int(fields[4], 16)
            if vaddr <= address < vaddr + filesz:
                return address - vaddr + offset
    raise AssertionError(f"{address:#x} is in no LOAD segment of {binary}")


def test_this_process_names_the_c_librarys_sched_yield() -> None:
    libc = ctypes.CDLL(None)
    address = ctypes.cast(libc.sched_yield, ctypes.c_void_p).value
    assert address is not None
    code = Symbolizer().user(os.getpid(), address + 2)
    assert (code.library, code.function) == ("libc.so.6", "sched_yield")
    assert Symbolizer().user(os.getpid(), 8) == Symbolizer().user(os.getpid(), 16)
    assert Symbolizer().user(os.getpid(), 8).library == UNKNOWN


def test_vdso_functions_are_named_from_this_process_image() -> None:
    maps = parse_maps(Path(f"/proc/{os.getpid()}/maps").read_text())
    vdso = next(mapping for mapping in maps.all() if mapping.path == "[vdso]")
    functions = own_vdso(ProcFS())
    assert functions is not None
    names = {functions.function_at(offset) for offset in range(0, vdso.end - vdso.start, 16)}
    assert {"clock_gettime", "gettimeofday"} <= names


def test_a_file_is_read_once_per_identity() -> None:
    cache = SymbolCache()
    binary = build("code_sites")
    first = cache.functions(binary)
    assert cache.functions(binary) is first
    assert cache.files_read == 1


def test_a_copy_of_a_file_read_is_known_by_its_build_id(tmp_path: Path) -> None:
    """The same library in another container's image (another device and inode, the same build) is not parsed
    again: its build id, read from the program headers' notes alone, finds the functions already read."""
    cache = SymbolCache()
    binary = build("code_sites")
    copy = tmp_path / "code_sites"
    shutil.copyfile(binary, copy)
    first = cache.functions(binary)
    assert first is not None and first.build_id is not None
    assert cache.functions(copy) is first
    assert cache.files_read == 1


def test_the_build_id_from_the_notes_is_the_one_pyelftools_reads() -> None:
    libc = next(m.path for m in parse_maps(Path(f"/proc/{os.getpid()}/maps").read_text()).all() if "libc." in m.path)
    for path in (build("code_sites"), Path(sys.executable).resolve(), Path(libc)):
        with path.open("rb") as file:
            functions = read_functions(file)
            assert functions is not None and functions.build_id is not None, path
            assert read_build_id(file) == functions.build_id, path
    with Path(__file__).open("rb") as not_elf:
        assert read_build_id(not_elf) is None


def test_kallsyms_text_symbols() -> None:
    symbols = parse_kallsyms(
        "ffffffff81000000 T _stext\nffffffff81001000 t do_sched_yield\nffffffff81002000 D some_data\n"
        "ffffffff81003000 T schedule [kvm]\n0000000000000000 T hidden\n"
    )
    assert symbols.function_at(0xFFFFFFFF81001010) == "do_sched_yield"
    assert symbols.function_at(0xFFFFFFFF81002010) == "do_sched_yield"  # data symbols do not end a function
    assert symbols.function_at(0xFFFFFFFF81003001) == "schedule"
    assert symbols.function_at(0x1000) is None


class CountingProcFS(ProcFS):
    """/proc (or a tree laid out like it), counting the reads of each process's maps."""

    def __init__(self, root: Path = Path("/proc")) -> None:
        super().__init__(root)
        self.maps_read = 0

    def read_text(self, pid: int | str, name: str, limit: int = 1 << 22) -> str | None:
        if name == "maps":
            self.maps_read += 1
        return super().read_text(pid, name, limit)


CHILD = """
import ctypes, sys
libc = ctypes.CDLL(None)
print(ctypes.cast(libc.sched_yield, ctypes.c_void_p).value, flush=True)
sys.stdin.readline()
uuid = ctypes.CDLL("libuuid.so.1")
print(ctypes.cast(uuid.uuid_generate, ctypes.c_void_p).value, flush=True)
sys.stdin.readline()
"""


def test_a_process_maps_are_read_again_only_for_a_library_loaded_since() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        sched_yield = int(child.stdout.readline())
        procfs = CountingProcFS()
        symbolizer = Symbolizer(procfs)
        for _ in range(5):  # five ticks: the maps are read once
            symbolizer.next_round()
            assert symbolizer.user(child.pid, sched_yield + 2).function == "sched_yield"
        assert procfs.maps_read == 1
        child.stdin.write("\n")
        child.stdin.flush()
        uuid_generate = int(child.stdout.readline())
        symbolizer.next_round()
        code = symbolizer.user(child.pid, uuid_generate + 2)
        assert code.library.startswith("libuuid.so.1") and code.function == "uuid_generate"
        assert procfs.maps_read == 2
    finally:
        child.kill()
        child.wait()


def fixture_process(root: Path, library: str, exe: Path, start_ticks: int = 1000) -> None:
    """/proc/1 of a fixture tree: *library* mapped executable at 0x7f0000000000, its exe a link to *exe*, started
    *start_ticks* after boot."""
    process = root / "1"
    process.mkdir(parents=True, exist_ok=True)
    (process / "stat").write_text(f"1 (program) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 {start_ticks} 1 1\n")
    inode = sum(map(ord, library))  # a file of its own
    (process / "maps").write_text(f"7f0000000000-7f0000010000 r-xp 00000000 fe:01 {inode} /lib/{library}\n")
    link = process / "exe"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(exe)


def test_kept_maps_are_read_again_after_an_exec_and_at_the_refresh(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("a program")
    second.write_text("another program")
    root = tmp_path / "proc"
    fixture_process(root, "libfirst.so.1", first)
    procfs = CountingProcFS(root)
    symbolizer = Symbolizer(procfs)
    assert symbolizer.user(1, 0x7F0000000100).library == "libfirst.so.1"
    fixture_process(root, "libsecond.so.2", first)  # another library at the same addresses: not seen yet
    symbolizer.next_round()
    assert symbolizer.user(1, 0x7F0000000100).library == "libfirst.so.1"
    fixture_process(root, "libsecond.so.2", second)  # the process executed another program
    symbolizer.next_round()
    assert symbolizer.user(1, 0x7F0000000100).library == "libsecond.so.2"
    fixture_process(root, "libthird.so.3", second)
    for _ in range(MAPS_REFRESH_ROUNDS - 1):
        symbolizer.next_round()
        assert symbolizer.user(1, 0x7F0000000100).library == "libsecond.so.2"
    symbolizer.next_round()
    assert symbolizer.user(1, 0x7F0000000100).library == "libthird.so.3"
    assert procfs.maps_read == 3


def test_kept_maps_are_read_again_when_the_pid_went_to_another_process_of_the_same_program(tmp_path: Path) -> None:
    program = tmp_path / "python3"
    program.write_text("an interpreter")
    root = tmp_path / "proc"
    fixture_process(root, "libfirst.so.1", program, start_ticks=1000)
    procfs = CountingProcFS(root)
    symbolizer = Symbolizer(procfs)
    assert symbolizer.user(1, 0x7F0000000100).library == "libfirst.so.1"
    # The process exited and a new one of the same program got its pid (pids wrap), with other libraries.
    fixture_process(root, "libsecond.so.2", program, start_ticks=5000)
    symbolizer.next_round()
    assert symbolizer.user(1, 0x7F0000000100).library == "libsecond.so.2"
    assert procfs.maps_read == 2


def _alpha_address(pid: int, binary: Path) -> int:
    """Where yield_from_alpha of *binary* is in process *pid*."""
    offset = _file_offset(binary, nm_functions(binary)["yield_from_alpha"][0])
    maps = parse_maps(Path(f"/proc/{pid}/maps").read_text())
    mapping = next(m for m in maps.all() if m.path == str(binary) and m.offset <= offset < m.offset + m.end - m.start)
    return mapping.start + offset - mapping.offset


def test_a_process_captured_while_it_lived_is_named_after_it_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    binary = build("code_sites")
    first, second = Workload(binary, "-", 0, 0, 0, 0), Workload(binary, "-", 0, 0, 0, 0)
    addresses = {work.pid: _alpha_address(work.pid, binary) for work in (first, second)}
    captured, bounded, not_captured = Symbolizer(), Symbolizer(), Symbolizer()
    assert captured.capture(first.pid)
    monkeypatch.setattr(symbolizer, "CAPTURED_PROCESSES", 1)
    assert bounded.capture(first.pid) and bounded.capture(second.pid)  # the first is forgotten
    first.release()
    second.release()
    assert not captured.capture(first.pid)  # gone: nothing to read
    named = captured.user(first.pid, addresses[first.pid])
    assert (named.library, named.function) == ("code_sites", "yield_from_alpha")
    assert not_captured.user(first.pid, addresses[first.pid]).library == UNKNOWN
    assert bounded.user(first.pid, addresses[first.pid]).library == UNKNOWN
    assert bounded.user(second.pid, addresses[second.pid]).function == "yield_from_alpha"
    captured.close()
    bounded.close()


def test_a_capture_reads_no_file_and_naming_reads_only_the_file_named() -> None:
    """Capturing a process holds its files open without reading them (the C library, the loader and the program
    itself); naming an address after it exited reads the one file that holds it, from the descriptor held."""
    binary = build("code_sites")
    work = Workload(binary, "-", 0, 0, 0, 0)
    address = _alpha_address(work.pid, binary)
    cache = SymbolCache()
    namer = Symbolizer(cache=cache)
    try:
        assert namer.capture(work.pid)
        assert cache.files_read == 0
        work.release()
        named = namer.user(work.pid, address)
        assert (named.library, named.function) == ("code_sites", "yield_from_alpha")
        assert cache.files_read == 1
    finally:
        namer.close()


def descriptors_on(paths: set[str]) -> list[str]:
    """The files among *paths* that this process holds descriptors on, one entry per descriptor."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed since
        if target in paths:
            held.append(target)
    return sorted(held)


def test_the_files_held_for_captured_processes_are_bounded_and_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    binary = build("code_sites")
    work = Workload(binary, "-", 0, 0, 0, 0)
    try:
        # What the process maps executable, as its own maps say (the program, the C library and the loader).
        maps = parse_maps(Path(f"/proc/{work.pid}/maps").read_text())
        mapped = {os.path.realpath(m.path) for m in maps.all() if m.path != VDSO}
        assert descriptors_on(mapped) == []
        namer = Symbolizer()
        assert namer.capture(work.pid)
        assert descriptors_on(mapped) == sorted(mapped), "one descriptor held on each file the process maps"
        namer.close()
        assert descriptors_on(mapped) == []
        monkeypatch.setattr(symbolizer, "HELD_FILES", 1)
        bounded = Symbolizer()
        assert bounded.capture(work.pid)
        assert len(descriptors_on(mapped)) == 1
        bounded.close()
        assert descriptors_on(mapped) == []
    finally:
        work.release()
