"""A BPF map held by its file descriptor, read and pruned with bpf(2): no bcc in the reading process."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent.bpf import syscall
from agent.bpf.layouts import ctype_from_json

BATCH_ENTRIES = 256  # entries per BPF_MAP_LOOKUP_BATCH: one syscall and ~30 KB of buffer for the largest value
MAP_TYPE_HASH = 1
MAP_TYPE_ARRAY = 2
MAP_TYPE_LRU_HASH = 9
MAP_TYPE_RINGBUF = 27
_NO_BATCH = (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, 524)  # 524: the kernel's internal ENOTSUPP


@dataclass(frozen=True)
class MapSpec:
    """What the loader says about a map besides its fd: name, kind, sizes, and bcc's key and value descriptions."""

    name: str
    map_type: int
    key_size: int
    value_size: int
    max_entries: int
    key_desc: str  # JSON, as libbcc's bpf_table_key_desc ('' when the map has no key, e.g. a ring buffer)
    leaf_desc: str


class BpfMap:
    """One map: entries as (key, value) pairs, where a scalar key or value is an int and a struct is a ctypes object.

    Safe to read from several threads (a batched read holds the map's buffers for its duration).

    Reads take one BPF_MAP_LOOKUP_BATCH per BATCH_ENTRIES entries where the kernel has it (Linux >= 5.6), and
    otherwise two syscalls per entry (BPF_MAP_GET_NEXT_KEY, BPF_MAP_LOOKUP_ELEM), as bcc does.
    """

    def __init__(self, fd: int, spec: MapSpec) -> None:
        self.fd = fd
        self.spec = spec
        self.name = spec.name
        self.max_entries = spec.max_entries
        # A ring buffer has no keys or values (bcc still describes them as int).
        self.Key: Any = ctype_from_json(spec.key_desc) if spec.key_desc and spec.key_size else None
        self.Leaf: Any = ctype_from_json(spec.leaf_desc) if spec.leaf_desc and spec.value_size else None
        for what, kind, size in (("key", self.Key, spec.key_size), ("value", self.Leaf, spec.value_size)):
            if kind is not None and ctypes.sizeof(kind) != size:
                raise ValueError(f"map {spec.name}: {what} type is {ctypes.sizeof(kind)} bytes, the map's {size}")
        self._batch = spec.map_type in (MAP_TYPE_HASH, MAP_TYPE_ARRAY, MAP_TYPE_LRU_HASH)
        self._buffers: tuple[Any, ...] | None = None
        self._reading = threading.Lock()  # the batch buffers are reused: one batched read at a time

    def items(self) -> list[tuple[Any, Any]]:
        """Every entry, read now."""
        if self._batch:
            with self._reading:
                try:
                    return self._items_batched()
                except OSError as error:
                    if error.errno not in (*_NO_BATCH, errno.ENOSPC):
                        raise
                    self._batch = error.errno == errno.ENOSPC  # a crowded bucket: only this read goes key by key
        return self.items_by_key()

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """Every entry as the bytes of its key and value, read now (for a reader that decodes only what changed)."""
        if self._batch:
            with self._reading:
                try:
                    return self._items_batched(raw=True)
                except OSError as error:
                    if error.errno not in (*_NO_BATCH, errno.ENOSPC):
                        raise
                    self._batch = error.errno == errno.ENOSPC
        return [(bytes(key), bytes(value)) for key, value in self.items_by_key()]

    def drain(self) -> list[tuple[Any, Any]]:
        """Every entry, each deleted as it is read (BPF_MAP_LOOKUP_AND_DELETE_BATCH, Linux >= 5.6; elsewhere read,
        then deleted key by key: an update between the two is lost)."""
        found: list[tuple[Any, Any]] = []
        if self._batch:
            with self._reading:
                try:
                    return self._items_batched(delete=True, found=found)
                except OSError as error:  # what the batches before it took out of the map is in *found*
                    if error.errno not in (*_NO_BATCH, errno.ENOSPC):
                        raise
        rest = self.items_by_key()
        self.delete(key for key, _value in rest)
        return found + rest

    def _items_batched(
        self, delete: bool = False, found: list[tuple[Any, Any]] | None = None, raw: bool = False
    ) -> list[tuple[Any, Any]]:
        if self._buffers is None:
            token_size = max(self.spec.key_size, 8)
            self._buffers = (
                ctypes.create_string_buffer(token_size),
                ctypes.create_string_buffer(token_size),
                ctypes.create_string_buffer(self.spec.key_size * BATCH_ENTRIES),
                ctypes.create_string_buffer(self.spec.value_size * BATCH_ENTRIES),
            )
        token_a, token_b, keys, values = self._buffers
        found = [] if found is None else found
        token_in = None
        while True:
            count, more = syscall.lookup_batch(self.fd, token_in, token_b, keys, values, BATCH_ENTRIES, delete)
            if count and raw:
                key_size, value_size = self.spec.key_size, self.spec.value_size
                key_bytes, value_bytes = keys.raw, values.raw
                found.extend(
                    (key_bytes[i * key_size : (i + 1) * key_size], value_bytes[i * value_size : (i + 1) * value_size])
                    for i in range(count)
                )
            elif count:
                found.extend(
                    zip(
                        self._decode(self.Key, keys, count),
                        self._decode(self.Leaf, values, count),
                        strict=True,
                    )
                )
            if not more:
                return found
            ctypes.memmove(token_a, token_b, len(token_b))
            token_in = token_a

    @staticmethod
    def _decode(kind: Any, buffer: Any, count: int) -> list[Any]:
        """The first *count* values of *kind* in *buffer*: ints for scalars, ctypes objects for structs."""
        return list((kind * count).from_buffer_copy(buffer))  # structs share this one copy, not the reused buffer

    def items_by_key(self) -> list[tuple[Any, Any]]:
        """Every entry, two syscalls each (BPF_MAP_GET_NEXT_KEY, BPF_MAP_LOOKUP_ELEM)."""
        key = ctypes.create_string_buffer(self.spec.key_size)
        following = ctypes.create_string_buffer(self.spec.key_size)
        value = ctypes.create_string_buffer(self.spec.value_size)
        found: list[tuple[Any, Any]] = []
        current = None
        while syscall.next_key(self.fd, current, following):
            key, following = following, key
            current = key
            if syscall.lookup(self.fd, key, value):  # gone since listed: skip it
                found.append((self._one(self.Key, key), self._one(self.Leaf, value)))
        return found

    @staticmethod
    def _one(kind: Any, buffer: Any) -> Any:
        return BpfMap._decode(kind, buffer, 1)[0]

    def count(self) -> int:
        """How many entries the map holds now."""
        return len(self.items())

    def get(self, key: Any) -> Any | None:
        """The value of *key* (an int for a scalar key), or None."""
        value = ctypes.create_string_buffer(self.spec.value_size)
        if not syscall.lookup(self.fd, self._key_bytes(key), value):
            return None
        return self._one(self.Leaf, value)

    def set(self, key: Any, value: Any) -> None:
        """Set *key* to *value* (an int for a scalar, or a ctypes object of the map's value type)."""
        raw = self.Leaf(value) if not isinstance(value, ctypes.Structure | ctypes.Union) else value
        syscall.update(self.fd, self._key_bytes(key), ctypes.create_string_buffer(bytes(raw), self.spec.value_size))

    def delete(self, keys: Iterable[Any]) -> int:
        """Delete each of *keys* that is present; how many were."""
        return sum(1 for key in keys if syscall.delete(self.fd, self._key_bytes(key)))

    def _key_bytes(self, key: Any) -> Any:
        raw = self.Key(key) if not isinstance(key, ctypes.Structure | ctypes.Union) else key
        return ctypes.create_string_buffer(bytes(raw), self.spec.key_size)

    def close(self) -> None:
        """Let go of the map (the kernel frees it once no program or fd holds it)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
