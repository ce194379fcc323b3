"""gzip of the exposition text that compresses again only what changed since the last scrape.

The text comes in chunks (agent.exposition.text); each is compressed on its own into a raw deflate stream ended
at a byte boundary (a sync flush), and the streams laid end to end, closed by an empty final block, are one
valid deflate stream (parallel gzip tools build theirs the same way). A chunk whose text is the same as at the
last scrape (idle workloads: the same parts) is its last compressed bytes again; only the CRC-32 is computed over
all the text.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable

from agent.exposition.text import Chunk

# magic, deflate, no flags, no mtime, "fastest" (level 1), unknown OS
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff"
FINAL_BLOCK = b"\x03\x00"  # an empty final block, fixed Huffman codes


class ChunkedGzip:
    """Compresses chunked text to gzip, remembering each chunk's compressed bytes until the next call."""

    def __init__(self, level: int) -> None:
        self.level = level
        self._last: dict[tuple[str, int], tuple[list[bytes], bytes]] = {}

    def compress(self, chunks: Iterable[Chunk]) -> bytes:
        """The gzip file (one member) of the chunks' text, in order."""
        out, kept, crc, size = [GZIP_HEADER], {}, 0, 0
        last = self._last
        for key, parts in chunks:
            text = b"".join(parts)
            crc = zlib.crc32(text, crc)
            size += len(text)
            known = last.get(key)
            if known is None or known[0] != parts:  # the same part objects mostly: compared by identity first
                compressor = zlib.compressobj(self.level, zlib.DEFLATED, -zlib.MAX_WBITS)
                known = (parts, compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH))
            kept[key] = known
            out.append(known[1])
        self._last = kept
        out.append(FINAL_BLOCK)
        out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
        return b"".join(out)
