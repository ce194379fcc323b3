"""Names of code as profilers print them, made the names :class:`~agent.diagnosis.facts.CodeShare` rows use.

A shared object is named by its file name (``/lib64/libc-2.15.so`` -> ``libc-2.15.so``), less the hash a wheel adds
(``libopenblas64_p-r0-2f7c42d4.3.18.so`` -> ``libopenblas64_p-r0.3.18.so``); kernel code is ``[kernel]``; an
address no mapping explains is ``(unknown)``. A symbol that is only an address has no function (None).
"""

from __future__ import annotations

import re

KERNEL = "[kernel]"
UNKNOWN = "(unknown)"
_WHEEL_HASH = re.compile(r"-[0-9a-f]{8}(?=[.])")
_KERNEL_NAMES = re.compile(r"^\[(?:kernel(?:\.kallsyms|\.vmlinux)?|vmlinux|kernel\.kallsyms\][^\]]*)\]$|^vmlinux")
_ADDRESS = re.compile(r"^(?:0x)?[0-9a-fA-F]{6,16}$")


def library(dso: str | None) -> str:
    """The library name of *dso* as a profiler printed it (a path, ``[kernel.kallsyms]``, ``[unknown]``)."""
    if not dso:
        return UNKNOWN
    dso = dso.strip()
    if _KERNEL_NAMES.match(dso) or dso.startswith("[kernel"):
        return KERNEL
    if dso in ("[unknown]", "??", "[anon]", "//anon"):
        return UNKNOWN
    name = dso.rstrip("/").rsplit("/", 1)[-1]
    return _WHEEL_HASH.sub("", name) or UNKNOWN


def function(symbol: str | None) -> str | None:
    """The function of *symbol*: None for an address or nothing; ``sgemm_thread_nt+0xe35`` -> ``sgemm_thread_nt``."""
    if not symbol:
        return None
    symbol = symbol.strip()
    if not symbol or _ADDRESS.match(symbol) or symbol in ("[unknown]", "??"):
        return None
    return re.sub(r"\+0x[0-9a-fA-F]+$", "", symbol)


def is_kernel(dso: str | None) -> bool:
    """True when *dso* names kernel code."""
    return library(dso) == KERNEL
