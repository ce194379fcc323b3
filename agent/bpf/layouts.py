"""ctypes types from bcc's JSON description of a map's key or value (libbcc's bpf_table_key_desc/leaf_desc).

The loader child asks bcc for these descriptions and hands them over with the map, so the agent builds the same
types bcc would, without importing bcc.
"""

from __future__ import annotations

import ctypes
import json
from typing import Any

# bcc's BPF.str2ctype
SCALARS: dict[str, Any] = {
    "_Bool": ctypes.c_bool,
    "char": ctypes.c_char,
    "wchar_t": ctypes.c_wchar,
    "unsigned char": ctypes.c_ubyte,
    "short": ctypes.c_short,
    "unsigned short": ctypes.c_ushort,
    "int": ctypes.c_int,
    "unsigned int": ctypes.c_uint,
    "long": ctypes.c_long,
    "unsigned long": ctypes.c_ulong,
    "long long": ctypes.c_longlong,
    "unsigned long long": ctypes.c_ulonglong,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "long double": ctypes.c_longdouble,
    "__int128": ctypes.c_int64 * 2,
    "unsigned __int128": ctypes.c_uint64 * 2,
}
_KINDS = ("struct", "struct_packed", "union")


class LayoutError(ValueError):
    """A type description bcc would not produce."""


def ctype_from_json(text: str) -> Any:
    """The ctypes type that the JSON description *text* describes."""
    return decode(json.loads(text))


def decode(desc: Any) -> Any:
    """The ctypes type of a decoded description: a scalar name, or [name, fields, kind] (as bcc's _decode_table_type).

    A field is [name, type], [name, type, [length]] (an array), [name, type, bits] (a bit field), or a nested
    [name, fields, kind].
    """
    if isinstance(desc, str):
        if desc not in SCALARS:
            raise LayoutError(f"unknown scalar type {desc!r}")
        return SCALARS[desc]
    if not isinstance(desc, list) or len(desc) < 2 or not isinstance(desc[1], list):
        raise LayoutError(f"cannot decode type {desc!r}")
    anonymous: list[str] = []
    fields: list[tuple[Any, ...]] = []
    for field in desc[1]:
        if not isinstance(field, list) or len(field) not in (2, 3):
            raise LayoutError(f"cannot decode field {field!r}")
        if len(field) == 2:
            fields.append((field[0], decode(field[1])))
        elif isinstance(field[2], list):
            fields.append((field[0], decode(field[1]) * field[2][0]))
        elif isinstance(field[2], int):
            fields.append((field[0], decode(field[1]), field[2]))
        elif field[2] in _KINDS:
            name = field[0] or f"__anon{len(anonymous)}"
            if not field[0]:
                anonymous.append(name)
            fields.append((name, decode(field)))
        else:
            raise LayoutError(f"cannot decode field {field!r}")
    kind = desc[2] if len(desc) > 2 else "struct"
    base = ctypes.Union if kind == "union" else ctypes.Structure
    namespace: dict[str, Any] = {"_anonymous_": anonymous, "_fields_": fields}
    if kind == "struct_packed":
        namespace["_pack_"] = 1
    return type(str(desc[0]), (base,), namespace)
