"""Facts about the running kernel: release, BTF, headers for bcc, tracefs and tracepoints, capabilities.

Everything here reads the machine and reports; only :func:`mount_tracefs` and
:func:`prepare_headers` change anything (a tracefs mount, and a private tree of
symlinks plus ``BCC_KERNEL_SOURCE`` for this process).
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.machine.procfs import ProcFS

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
BTF_VMLINUX = Path("/sys/kernel/btf/vmlinux")
BPF_STATS_SYSCTL = "kernel/bpf_stats_enabled"  # under /proc/sys
KCONFIG_H = Path("include/linux/kconfig.h")

# Capability numbers from linux/capability.h.
CAPABILITIES = {
    "CAP_SYS_PTRACE": 19,
    "CAP_SYS_ADMIN": 21,
    "CAP_SYS_RESOURCE": 24,
    "CAP_PERFMON": 38,
    "CAP_BPF": 39,
}


@dataclass(frozen=True)
class HeadersChoice:
    """Where bcc will find kernel headers, and how the agent found them."""

    source: str  # BCC_KERNEL_SOURCE | modules-build | kheaders | debian-nearest
    path: Path
    detail: str
    bcc_kernel_source: Path | None = None  # set BCC_KERNEL_SOURCE to this before compiling


class HeadersNotFound(RuntimeError):
    """No usable kernel headers; the message says what to install."""


def kernel_release() -> str:
    """The running kernel's release string, as `uname -r` prints it."""
    return platform.release()


def version_tuple(release: str) -> tuple[int, ...]:
    """Leading numeric components of a kernel release: '6.1.0-57-cloud-amd64' -> (6, 1, 0)."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", release)
    if not match:
        return ()
    return tuple(int(part) for part in match.groups(default="0"))


def _has_kconfig(tree: Path) -> bool:
    return (tree / KCONFIG_H).is_file()


def find_kernel_headers(
    release: str,
    environ: Mapping[str, str],
    modules_dir: Path = Path("/lib/modules"),
    sys_kernel: Path = Path("/sys/kernel"),
    usr_src: Path = Path("/usr/src"),
) -> HeadersChoice:
    """Pick kernel headers for bcc, in the documented order.

    1. ``BCC_KERNEL_SOURCE`` from the environment;
    2. ``/lib/modules/$(uname -r)/build`` (with its ``source`` sibling, Debian style);
    3. ``/sys/kernel/kheaders.tar.xz`` (CONFIG_IKHEADERS; bcc unpacks it itself);
    4. the installed Debian headers nearest to the running version. Safe only because
       schedwatch's programs use tracepoint fields and helpers, never kernel structs.
    """
    explicit = environ.get("BCC_KERNEL_SOURCE")
    if explicit:
        path = Path(explicit)
        if not _has_kconfig(path):
            raise HeadersNotFound(
                f"BCC_KERNEL_SOURCE={explicit} has no {KCONFIG_H}: point it at a kernel headers tree or unset it"
            )
        return HeadersChoice("BCC_KERNEL_SOURCE", path, "from the environment")

    build = modules_dir / release / "build"
    if _has_kconfig(build) or _has_kconfig(modules_dir / release / "source"):
        return HeadersChoice("modules-build", build, "headers of the running kernel")

    kheaders = sys_kernel / "kheaders.tar.xz"
    if kheaders.is_file():
        return HeadersChoice("kheaders", kheaders, "CONFIG_IKHEADERS archive of the running kernel")

    nearest = _nearest_debian_headers(release, usr_src)
    if nearest is not None:
        arch_dir, common_dir = nearest
        return HeadersChoice(
            "debian-nearest",
            arch_dir,
            f"running {release}, using {arch_dir.name} (+ {common_dir.name}); tracepoint-only programs",
        )
    raise HeadersNotFound(
        f"no kernel headers for {release}: install them (Debian/Ubuntu: apt-get install "
        f"linux-headers-$(uname -r), or linux-headers-cloud-amd64 as the nearest), "
        f"enable CONFIG_IKHEADERS, or set BCC_KERNEL_SOURCE"
    )


def _nearest_debian_headers(release: str, usr_src: Path) -> tuple[Path, Path] | None:
    """Installed (arch-specific, common) header dir pairs, nearest version first."""
    if not usr_src.is_dir():
        return None
    wanted = version_tuple(release)
    candidates: list[tuple[tuple[int, ...], tuple[int, ...], Path, Path]] = []
    for arch_dir in usr_src.glob("linux-headers-*"):
        if arch_dir.name.endswith("-common") or not (arch_dir / "include" / "generated").is_dir():
            continue
        common_dir = _common_dir_for(arch_dir)
        if common_dir is None:
            continue
        version_text = arch_dir.name.removeprefix("linux-headers-")
        version = version_tuple(version_text)
        distance = tuple(abs(a - b) for a, b in zip(version, wanted, strict=False))
        abi = re.match(r"[\d.]+-(\d+)", version_text)  # Debian's ABI number breaks ties: newest wins
        newest_first = (*(-n for n in version), -int(abi.group(1)) if abi else 0)
        candidates.append((distance, newest_first, arch_dir, common_dir))
    if not candidates:
        return None
    _, _, arch_dir, common_dir = min(candidates)
    return arch_dir, common_dir


def _common_dir_for(arch_dir: Path) -> Path | None:
    """Debian splits headers into an arch dir and a '-common' dir holding include/linux."""
    if _has_kconfig(arch_dir):
        return arch_dir
    match = re.match(r"(linux-headers-\d+\.\d+\.\d+-\d+)", arch_dir.name)
    if match:
        for name in (f"{match.group(1)}-common", match.group(1)):  # Debian, Ubuntu
            if _has_kconfig(arch_dir.parent / name):
                return arch_dir.parent / name
    return None


def merge_header_trees(destination: Path, sources: list[Path]) -> None:
    """Lay a tree of symlinks at *destination* that unites *sources* (earlier ones win).

    bcc wants one directory holding both the generated headers and include/linux;
    Debian ships them in two. Directories present in several sources are recursed into.
    """
    destination.mkdir(parents=True, exist_ok=True)
    entries: dict[str, list[Path]] = {}
    for source in sources:
        for child in sorted(source.iterdir()):
            entries.setdefault(child.name, []).append(child)
    for name, paths in entries.items():
        target = destination / name
        if target.is_symlink() or target.exists():
            continue
        if len(paths) > 1 and all(p.is_dir() for p in paths):
            merge_header_trees(target, paths)
        else:
            target.symlink_to(paths[0].resolve())


def prepare_headers(choice: HeadersChoice, state_dir: Path, usr_src: Path = Path("/usr/src")) -> HeadersChoice:
    """Make *choice* usable by bcc in this process and return it with ``bcc_kernel_source`` set if needed."""
    if choice.source == "BCC_KERNEL_SOURCE":
        return choice
    if choice.source != "debian-nearest":
        return choice  # bcc finds /lib/modules/.../build and kheaders.tar.xz by itself
    common = _common_dir_for(choice.path)
    assert common is not None
    merged = state_dir / "kernel-headers" / choice.path.name
    if not _has_kconfig(merged):
        merge_header_trees(merged, [choice.path, common] if common != choice.path else [choice.path])
    os.environ["BCC_KERNEL_SOURCE"] = str(merged)
    return HeadersChoice(choice.source, choice.path, choice.detail, bcc_kernel_source=merged)


def tracefs_root() -> Path | None:
    """The mounted tracefs events root, or None (also when this process may not look inside it)."""
    for root in TRACEFS_CANDIDATES:
        try:
            if (root / "events").is_dir():
                return root
        except PermissionError:
            continue
    return None


def tracefs_denied() -> Path | None:
    """A tracefs root that exists but that this process may not read (tracefs is root's alone by default), or None."""
    for root in TRACEFS_CANDIDATES:
        try:
            (root / "events").is_dir()
        except PermissionError:
            return root
    return None


def mount_tracefs() -> Path:
    """Mount tracefs at /sys/kernel/tracing (needs CAP_SYS_ADMIN); returns its root."""
    root = TRACEFS_CANDIDATES[0]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tracefs", str(root).encode(), b"tracefs", 0, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"cannot mount tracefs at {root}: {os.strerror(errno)}")
    return root


def tracepoint_fields(category: str, event: str, root: Path | None = None) -> frozenset[str] | None:
    """Field names of a tracepoint from its format file, or None when the kernel lacks it."""
    root = root or tracefs_root()
    if root is None:
        return None
    try:
        text = (root / "events" / category / event / "format").read_text(errors="replace")
    except OSError:
        return None
    return frozenset(re.findall(r"field:[^;]*?\b(\w+)(?:\[\d*\])?;", text))


def has_tracepoint(category: str, event: str, root: Path | None = None) -> bool:
    """Whether the kernel has this tracepoint (and tracefs is mounted to see it)."""
    return tracepoint_fields(category, event, root) is not None


def effective_capabilities(proc: ProcFS | None = None) -> dict[str, bool]:
    """The capabilities schedwatch cares about, from CapEff of this process."""
    capeff = 0
    for line in ((proc or ProcFS()).read_text("self", "status") or "").splitlines():
        if line.startswith("CapEff:"):
            capeff = int(line.split()[1], 16)
    return {name: bool(capeff >> bit & 1) for name, bit in CAPABILITIES.items()}


def bpf_stats_enabled() -> bool | None:
    """Whether kernel.bpf_stats_enabled is on (None when the sysctl is missing)."""
    text = ProcFS().read_text("sys", BPF_STATS_SYSCTL)
    return None if text is None else text.strip() != "0"


def has_btf() -> bool:
    """Whether the kernel exposes its own BTF (not needed by bcc programs, reported for context)."""
    return BTF_VMLINUX.is_file()


def sched_switch_blocked_mask(root: Path | None = None) -> int | None:
    """The bits of sched_switch's prev_state that mean the task was not runnable, from the tracepoint's own format.

    The print format tests ``REC->prev_state & (MASK)`` to choose between state letters and "R"
    (runnable, "+" when preempted). The encoding has changed across kernel versions, so it is read
    from the running kernel rather than assumed.
    """
    text = _sched_switch_format(root)
    if text is None:
        return None
    marker = "REC->prev_state & "
    start = text.find(marker)
    if start < 0:
        return None
    expression = _balanced_parentheses(text, start + len(marker))
    return None if expression is None else _evaluate_integer_expression(expression)


def _sched_switch_format(root: Path | None) -> str | None:
    root = root or tracefs_root()
    if root is None:
        return None
    try:
        return (root / "events" / "sched" / "sched_switch" / "format").read_text(errors="replace")
    except OSError:
        return None


def sched_switch_dead_mask(root: Path | None = None) -> int | None:
    """The prev_state bits sched_switch reports for a task's last switch-out after it exited ("X" and "Z")."""
    return sched_switch_state_mask("XZ", root)


def sched_switch_state_mask(letters: str, root: Path | None = None) -> int | None:
    """The prev_state bits sched_switch prints as any of *letters* (e.g. "S", or "DI"), from the ``__print_flags``
    table of the tracepoint's print format; None when the format cannot be read or has none of them."""
    text = _sched_switch_format(root)
    if text is None:
        return None
    bits = {
        int(value, 16)
        for value, letter in re.findall(r'\{\s*(0x[0-9a-fA-F]+)\s*,\s*"([A-Za-z])"\s*\}', text)
        if letter in letters
    }
    return sum(bits) or None


def _balanced_parentheses(text: str, start: int) -> str | None:
    if start >= len(text) or text[start] != "(":
        return None
    depth = 0
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return text[start : index + 1]
    return None


def _evaluate_integer_expression(expression: str) -> int | None:
    """Evaluate a C constant expression of integers, | + - << >> and parentheses; None for anything else.

    A mask is at most 64 bits: anything wider (e.g. ``1 << 4000000000``, which would take half a gigabyte) or nested
    too deeply to parse is not one.
    """
    import ast

    allowed = (ast.BitOr, ast.Add, ast.Sub, ast.LShift, ast.RShift)

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, allowed):
            left, right = value(node.left), value(node.right)
            operations = {
                ast.BitOr: int.__or__,
                ast.Add: int.__add__,
                ast.Sub: int.__sub__,
                ast.LShift: int.__lshift__,
                ast.RShift: int.__rshift__,
            }
            if isinstance(node.op, ast.LShift | ast.RShift) and not 0 <= right <= 64:
                raise ValueError(f"shift by {right}")
            result = operations[type(node.op)](left, right)
            if result.bit_length() > 64:
                raise ValueError("wider than 64 bits")
            return result
        raise ValueError(ast.dump(node))

    try:
        return value(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return None
