"""The bpf(2) map commands the agent needs, called through ctypes (no libbpf, no bcc)."""

from __future__ import annotations

import ctypes
import os
from functools import cache

NR_BPF = {"x86_64": 321, "aarch64": 280}

MAP_LOOKUP_ELEM = 1
MAP_UPDATE_ELEM = 2
MAP_DELETE_ELEM = 3
MAP_GET_NEXT_KEY = 4
OBJ_GET_INFO_BY_FD = 15
MAP_LOOKUP_BATCH = 24
MAP_LOOKUP_AND_DELETE_BATCH = 25


class _ElemAttr(ctypes.Structure):
    """The BPF_MAP_*_ELEM and BPF_MAP_GET_NEXT_KEY part of union bpf_attr."""

    _fields_ = [
        ("map_fd", ctypes.c_uint32),
        ("_pad", ctypes.c_uint32),
        ("key", ctypes.c_uint64),
        ("value", ctypes.c_uint64),  # next_key for BPF_MAP_GET_NEXT_KEY
        ("flags", ctypes.c_uint64),
    ]


class _BatchAttr(ctypes.Structure):
    """The BPF_MAP_*_BATCH part of union bpf_attr."""

    _fields_ = [
        ("in_batch", ctypes.c_uint64),
        ("out_batch", ctypes.c_uint64),
        ("keys", ctypes.c_uint64),
        ("values", ctypes.c_uint64),
        ("count", ctypes.c_uint32),
        ("map_fd", ctypes.c_uint32),
        ("elem_flags", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
    ]


class _InfoAttr(ctypes.Structure):
    """The BPF_OBJ_GET_INFO_BY_FD part of union bpf_attr."""

    _fields_ = [("bpf_fd", ctypes.c_uint32), ("info_len", ctypes.c_uint32), ("info", ctypes.c_uint64)]


class MapInfo(ctypes.Structure):
    """The head of struct bpf_map_info: what the kernel says a map is."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("key_size", ctypes.c_uint32),
        ("value_size", ctypes.c_uint32),
        ("max_entries", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("name", ctypes.c_char * 16),
    ]


@cache
def _syscall() -> tuple[ctypes._CFuncPtr, int]:  # type: ignore[name-defined]
    number = NR_BPF.get(os.uname().machine)
    if number is None:
        raise OSError(f"bpf(2): unknown syscall number on {os.uname().machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    function = libc.syscall
    function.restype = ctypes.c_long
    return function, number


def bpf(command: int, attr: ctypes.Structure) -> int:
    """bpf(*command*, *attr*); its result, or OSError with the kernel's errno."""
    function, number = _syscall()
    result = int(function(ctypes.c_long(number), ctypes.c_int(command), ctypes.byref(attr), ctypes.sizeof(attr)))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def lookup(fd: int, key: ctypes.Array[ctypes.c_char], value: ctypes.Array[ctypes.c_char]) -> bool:
    """Copy the value of *key* into *value*; False when the map has no such key."""
    attr = _ElemAttr(map_fd=fd, key=ctypes.addressof(key), value=ctypes.addressof(value))
    try:
        bpf(MAP_LOOKUP_ELEM, attr)
    except FileNotFoundError:
        return False
    return True


def update(fd: int, key: ctypes.Array[ctypes.c_char], value: ctypes.Array[ctypes.c_char]) -> None:
    """Set *key* to *value* (BPF_ANY: made if absent)."""
    bpf(MAP_UPDATE_ELEM, _ElemAttr(map_fd=fd, key=ctypes.addressof(key), value=ctypes.addressof(value)))


def delete(fd: int, key: ctypes.Array[ctypes.c_char]) -> bool:
    """Delete *key*; False when the map had no such key."""
    try:
        bpf(MAP_DELETE_ELEM, _ElemAttr(map_fd=fd, key=ctypes.addressof(key)))
    except FileNotFoundError:
        return False
    return True


def next_key(fd: int, key: ctypes.Array[ctypes.c_char] | None, out: ctypes.Array[ctypes.c_char]) -> bool:
    """Write the key after *key* (the first one when None) into *out*; False after the last."""
    attr = _ElemAttr(map_fd=fd, key=0 if key is None else ctypes.addressof(key), value=ctypes.addressof(out))
    try:
        bpf(MAP_GET_NEXT_KEY, attr)
    except FileNotFoundError:
        return False
    return True


def lookup_batch(
    fd: int,
    token_in: ctypes.Array[ctypes.c_char] | None,
    token_out: ctypes.Array[ctypes.c_char],
    keys: ctypes.Array[ctypes.c_char],
    values: ctypes.Array[ctypes.c_char],
    count: int,
    delete: bool = False,
) -> tuple[int, bool]:
    """BPF_MAP_LOOKUP_BATCH of up to *count* entries after *token_in* (None: from the start); with *delete*,
    BPF_MAP_LOOKUP_AND_DELETE_BATCH (each entry copied and deleted under its bucket's lock).

    Returns how many entries were copied into *keys* and *values* and whether the map has more (the next call
    passes *token_out* as its *token_in*). OSError EINVAL or ENOTSUPP/EOPNOTSUPP: the kernel has no batch
    lookup for this map; ENOSPC: a hash bucket holds more than *count* entries.
    """
    attr = _BatchAttr(
        in_batch=0 if token_in is None else ctypes.addressof(token_in),
        out_batch=ctypes.addressof(token_out),
        keys=ctypes.addressof(keys),
        values=ctypes.addressof(values),
        count=count,
        map_fd=fd,
    )
    try:
        bpf(MAP_LOOKUP_AND_DELETE_BATCH if delete else MAP_LOOKUP_BATCH, attr)
    except FileNotFoundError:
        return attr.count, False  # the last batch (possibly empty)
    return attr.count, True


def map_info(fd: int) -> MapInfo:
    """What the kernel says the map behind *fd* is (type, key and value size, capacity, name)."""
    info = MapInfo()
    bpf(OBJ_GET_INFO_BY_FD, _InfoAttr(bpf_fd=fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info)))
    return info
