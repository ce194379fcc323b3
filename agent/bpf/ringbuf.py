"""Consumer of a BPF ring buffer (BPF_MAP_TYPE_RINGBUF) through its fd: mmap and epoll, as libbpf's ring_buffer.

The kernel maps the ring as a consumer page the reader writes, then a producer page and the data area (mapped twice
in a row, so a record that wraps reads as one slice) that the reader only reads. Each record starts with an 8-byte
header: its length, with a busy bit while the producer writes it and a discard bit if it was thrown away.
One thread at a time may consume a ring.

The positions and headers are read as plain loads: on x86-64 these are acquire loads; on arm64 the interpreter's own
work between reading a header and reading its record stands in for the barrier libbpf uses.
"""

from __future__ import annotations

import mmap
import select
import struct
from collections.abc import Callable

BUSY_BIT = 1 << 31
DISCARD_BIT = 1 << 30
HEADER_SIZE = 8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class RingBuffer:
    """A BPF ring buffer map, consumed in this process; each record goes to *on_record* as bytes."""

    def __init__(self, fd: int, data_size: int, on_record: Callable[[bytes], None]) -> None:
        page = mmap.PAGESIZE
        if data_size <= 0 or data_size & (data_size - 1):
            raise ValueError(f"ring buffer size {data_size} is not a power of two")
        self._on_record = on_record
        self._mask = data_size - 1
        self._consumer = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        self._producer = mmap.mmap(fd, page + 2 * data_size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        self._data = memoryview(self._producer)[page:]
        self._epoll = select.epoll()
        self._epoll.register(fd, select.EPOLLIN)

    def poll(self, timeout_ms: int) -> int:
        """Wait up to *timeout_ms* for records, then hand over every one there is; how many were handed over."""
        self._epoll.poll(timeout_ms / 1000)
        return self.consume()

    def consume(self) -> int:
        """Hand over every record written so far, without waiting; how many were handed over."""
        handed = 0
        consumer = _U64.unpack_from(self._consumer, 0)[0]
        while True:
            producer = _U64.unpack_from(self._producer, 0)[0]
            progressed = False
            while consumer < producer:
                offset = consumer & self._mask
                length = _U32.unpack_from(self._data, offset)[0]
                if length & BUSY_BIT:
                    return handed  # being written: the producer's wake-up comes when it is done
                progressed = True
                size = length & ~(BUSY_BIT | DISCARD_BIT)
                if not length & DISCARD_BIT:
                    start = offset + HEADER_SIZE
                    self._on_record(bytes(self._data[start : start + size]))
                    handed += 1
                consumer += (size + HEADER_SIZE + 7) & ~7
                _U64.pack_into(self._consumer, 0, consumer)
            if not progressed:
                return handed

    def close(self) -> None:
        """Unmap the ring (the map's fd stays with its owner)."""
        self._epoll.close()
        self._data.release()
        self._producer.close()
        self._consumer.close()
