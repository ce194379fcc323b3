"""The few pieces of the protobuf wire format the runtime clients need (strings, integers, messages, maps)."""

from __future__ import annotations

from collections.abc import Iterator


def varint(value: int) -> bytes:
    """Encode a non-negative integer as a base-128 varint."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def string_field(number: int, text: str) -> bytes:
    """A length-delimited field holding *text*."""
    return message_field(number, text.encode())


def varint_field(number: int, value: int) -> bytes:
    """A varint field (integers, booleans, enums); negative values as their 64-bit two's complement."""
    return varint(number << 3) + varint(value & 0xFFFFFFFFFFFFFFFF)


def message_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field holding an encoded message."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def string_map_field(number: int, mapping: dict[str, str]) -> bytes:
    """A map<string, string> field: one entry message per key."""
    return b"".join(message_field(number, string_field(1, k) + string_field(2, v)) for k, v in mapping.items())


def _read_varint(buffer: bytes, offset: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if offset >= len(buffer) or shift > 63:
            raise ValueError("truncated varint")
        byte = buffer[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7


def fields(buffer: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field; length-delimited values as bytes, others as int."""
    offset = 0
    while offset < len(buffer):
        key, offset = _read_varint(buffer, offset)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, offset = _read_varint(buffer, offset)
            yield number, value
        elif wire_type == 2:
            length, offset = _read_varint(buffer, offset)
            if offset + length > len(buffer):
                raise ValueError("truncated field")
            yield number, buffer[offset : offset + length]
            offset += length
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            yield number, int.from_bytes(buffer[offset : offset + size], "little")
            offset += size
        else:
            raise ValueError(f"unsupported wire type {wire_type}")


def string_map(entries: list[bytes]) -> dict[str, str]:
    """Decode map<string, string> entries (each a message with key = 1, value = 2)."""
    result = {}
    for entry in entries:
        key = value = ""
        for number, data in fields(entry):
            if isinstance(data, bytes):
                if number == 1:
                    key = data.decode(errors="replace")
                elif number == 2:
                    value = data.decode(errors="replace")
        result[key] = value
    return result


def message(buffer: bytes, number: int) -> bytes:
    """The first length-delimited field *number* of *buffer* (a message, a string); b"" if absent."""
    for n, value in fields(buffer):
        if n == number and isinstance(value, bytes):
            return value
    return b""


def string(buffer: bytes, number: int) -> str:
    """The string field *number* of *buffer*; "" if absent."""
    return message(buffer, number).decode(errors="replace")


def string_map_of(buffer: bytes, number: int) -> dict[str, str]:
    """The map<string, string> field *number* of *buffer*."""
    return string_map([entry for n, entry in fields(buffer) if n == number and isinstance(entry, bytes)])
