"""The thread-pool implementations schedwatch knows: one row each, owning everything said about it.

A row names the files the implementation ships under (how /proc/PID/maps shows it), its API, how its version is
read, and the environment variables it reads: the thread count it takes (``variables``, its own first, then the
one it falls back to), other names it honours for that count, and the variables that change how its idle threads
wait. The process reader's allow-list, the library reader, the rules' fix and `verify` are all derived from these
rows, so a variable a fix names is always one the agent can read back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class PoolImplementation:
    """One thread-pool implementation."""

    api: str  # blas, openmp, tbb, torch, numexpr, accelerate
    implementation: str
    prefixes: tuple[str, ...]  # lowercased basenames start with one of these, then ".", "-" or "_"; () = never mapped
    variables: tuple[str, ...]  # what a fix sets for its thread count, its own first; () = no variable caps it
    also_reads: tuple[str, ...] = ()  # other names it takes the count from (a fix need not set them)
    tuning: tuple[str, ...] = ()  # how its idle threads wait (spin or sleep)
    name_version: re.Pattern[str] | None = None  # group 1 (and on): the version, in the lowercased basename
    content_version: re.Pattern[bytes] | None = None  # group 1: the version, in the file's .rodata
    functions: re.Pattern[str] | None = None  # its functions, for stacks whose frames do not name the file


SONAME_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")
OMP_NUM_THREADS = "OMP_NUM_THREADS"
OPENMP_TUNING = ("OMP_WAIT_POLICY", "KMP_BLOCKTIME")  # LLVM's and Intel's runtimes (one lineage)

IMPLEMENTATIONS: tuple[PoolImplementation, ...] = (
    PoolImplementation(
        "blas",
        "openblas",
        (
            "libopenblas",
            "libopenblasp",
            "libopenblaso",
            "libopenblas64_",
            "libopenblas64_p",
            "libopenblas64_o",
            "libscipy_openblas",
            "libscipy_openblas64_",
        ),
        ("OPENBLAS_NUM_THREADS", OMP_NUM_THREADS),
        also_reads=("GOTO_NUM_THREADS",),  # GotoBLAS's name, still read
        tuning=("OPENBLAS_THREAD_TIMEOUT",),
        # libopenblasp-r0.3.21.so; numpy 1.26's wheel: libopenblas64_p-r0-0cf96a72.3.23.dev.so (auditwheel's hash)
        name_version=re.compile(r"-r(\d+)(?:-[0-9a-f]{8})?\.(\d+\.\d+(?:\.[0-9a-z]+)?)\.so$"),
        content_version=re.compile(rb"OpenBLAS (\d+\.\d+\.\d+(?:\.[0-9a-z]+)*)"),
        functions=re.compile(
            r"^blas_thread_server$|^exec_blas|^inner_thread$|^blas_thread_|^[sdczq](?:gemm|symm|syrk|syr2k|trmm|trsm|"
            r"gemv|ger|getrf)_thread|^gotoblas_"
        ),
    ),
    # MKL's threading layer is OpenMP by default: OMP_NUM_THREADS when its own is unset.
    PoolImplementation(
        "blas",
        "mkl",
        ("libmkl_rt",),
        ("MKL_NUM_THREADS", OMP_NUM_THREADS),
        name_version=SONAME_VERSION,
        functions=re.compile(r"^mkl_serv_|^MKL_"),
    ),
    PoolImplementation(
        "blas", "blis", ("libblis",), ("BLIS_NUM_THREADS", OMP_NUM_THREADS), name_version=SONAME_VERSION
    ),
    PoolImplementation(
        "openmp",
        "gnu",
        ("libgomp",),
        (OMP_NUM_THREADS,),
        tuning=("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"),
        name_version=SONAME_VERSION,
        functions=re.compile(r"^gomp_|^GOMP_"),
    ),
    # LLVM's and Intel's runtimes share their code's names (__kmp_*): a frame without its file is read as LLVM's.
    PoolImplementation(
        "openmp",
        "llvm",
        ("libomp",),
        (OMP_NUM_THREADS,),
        tuning=OPENMP_TUNING,
        name_version=SONAME_VERSION,
        functions=re.compile(r"^__kmp|^__kmpc_"),
    ),
    PoolImplementation(
        "openmp", "intel", ("libiomp5",), (OMP_NUM_THREADS,), tuning=OPENMP_TUNING, name_version=SONAME_VERSION
    ),
    PoolImplementation(  # sized by affinity
        "tbb", "tbb", ("libtbb", "libtbb12"), (), name_version=SONAME_VERSION, functions=re.compile(r"^tbb::")
    ),
    PoolImplementation("torch", "torch", ("libtorch_cpu",), (OMP_NUM_THREADS,), name_version=SONAME_VERSION),
    # Pools no mapped file names: numexpr is a Python extension with a generic file name, vecLib is Apple's (macOS
    # only). Their variables are still read, and set by `verify`.
    PoolImplementation("numexpr", "numexpr", (), ("NUMEXPR_NUM_THREADS",)),
    PoolImplementation("accelerate", "veclib", (), ("VECLIB_MAXIMUM_THREADS",)),
)

BY_IMPLEMENTATION: dict[str, PoolImplementation] = {row.implementation: row for row in IMPLEMENTATIONS}

# When no pool library can be named: the variables of the commonest pools (OpenBLAS, MKL, then OpenMP).
UNMAPPED: tuple[str, ...] = ("openblas", "mkl", "gnu")

# Every variable that sets a thread count, OMP_NUM_THREADS first (what `verify` sets, all to one count).
COUNT_VARIABLES: tuple[str, ...] = tuple(
    dict.fromkeys([OMP_NUM_THREADS, *(name for row in IMPLEMENTATIONS for name in (*row.variables, *row.also_reads))])
)
# Every variable of every row: the only names read from a process's environment.
ALLOWED_VARIABLES: tuple[str, ...] = tuple(
    dict.fromkeys([*COUNT_VARIABLES, *(name for row in IMPLEMENTATIONS for name in row.tuning)])
)


def implementation_of(basename: str) -> PoolImplementation | None:
    """The row a file named *basename* is (``libopenblasp-r0.3.21.so``, ``libopenblas_haswellp-r0.2.20.so``,
    ``libgomp.so.1``), or None."""
    name = basename.lower()
    for row in IMPLEMENTATIONS:
        for prefix in row.prefixes:
            if name.startswith(prefix) and name[len(prefix) : len(prefix) + 1] in (".", "-", "_"):
                return row
    return None


def implementation_of_frame(library: str, function: str | None) -> PoolImplementation | None:
    """The row whose code a stack frame is: by its file (*library*), else by its *function*'s name, or None."""
    found = implementation_of(library)
    if found is not None or function is None:
        return found
    return next((row for row in IMPLEMENTATIONS if row.functions is not None and row.functions.search(function)), None)


def variables_of(implementation: str) -> tuple[str, ...]:
    """What a fix sets for *implementation*'s thread count; () for an implementation without a row or a variable."""
    row = BY_IMPLEMENTATION.get(implementation)
    return row.variables if row is not None else ()


def unmapped_variables() -> tuple[str, ...]:
    """The variables a fix names when no pool library is known."""
    return tuple(dict.fromkeys(name for implementation in UNMAPPED for name in variables_of(implementation)))


def reading(variable: str) -> frozenset[str]:
    """The implementations that read *variable* (for its count or for how their threads wait)."""
    return frozenset(
        row.implementation for row in IMPLEMENTATIONS if variable in (*row.variables, *row.also_reads, *row.tuning)
    )
