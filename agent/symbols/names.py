"""The names code is labelled with: library file names as the profilers' conventions have them, and the stand-ins for
code without a name."""

from __future__ import annotations

import re

KERNEL = "[kernel]"  # kernel code
UNKNOWN = "(unknown)"  # an address no mapping or no symbol explains
OTHER = "(other)"  # the rest of a workload's rows, beyond its top-k (or a workload not looked at closely)
# A wheel's hash before the next dot: libopenblas64_p-r0-0cf96a72.3.23.dev.so, libscipy_openblas64_-32a4b2a6.so
_WHEEL_HASH = re.compile(r"(?:-[0-9a-f]{8})+(?=[.])")  # repaired twice: two hashes
_DELETED = " (deleted)"
_C_LIBRARIES = re.compile(r"^(?:libc\.so|libc-\d|libpthread[.-]|ld-musl-|libc\.musl-)")


def library_name(path: str) -> str:
    """A mapped file's library name: its file name less a wheel's hash (``/x/libscipy_openblas64_-32a4b2a6.so`` ->
    ``libscipy_openblas64_.so``), so that one library has one name across wheels' builds."""
    if path.endswith(_DELETED):
        path = path[: -len(_DELETED)]
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return _WHEEL_HASH.sub("", name) or UNKNOWN


def is_c_library(library: str) -> bool:
    """Whether *library* (a library name) is the C library (glibc's libc or libpthread, musl)."""
    return bool(_C_LIBRARIES.match(library))
