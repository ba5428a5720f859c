"""Avro's binary encoding of flat records in plain Python: records whose fields are null,
boolean, int, long, string, an enum, or a union of null with one of those.

Why not fastavro for these: its writer chooses a union's branch by validating the datum
against each branch (about half a microsecond a nullable field: the decision's fields after
its request cost 8 µs, written here 3), and its reader's setup for each call costs more than
an action's body. The stream job reads an ``ActionRequested`` and writes a decision's fields
after its request for every action (bench/decision_cost.py).

``writer_for`` and ``reader_for`` build both from a parsed schema, or return None for a
schema outside the subset (``Codec`` then uses fastavro). tests/unit/test_flat.py holds every
writer byte for byte to fastavro's and every reader to fastavro's reading, on every schema
runonce has. The reader is stricter than fastavro where the bytes are not Avro: a varint
past 64 bits, an int past 32, a boolean byte other than 0 or 1, a string past the end.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

Writer = Callable[[Mapping[str, Any]], bytes]
#: (data, position) -> (record, the position after it)
Reader = Callable[[bytes, int], tuple[dict[str, Any], int]]

_Put = Callable[[Any], bytes]
_Get = Callable[[bytes, int], tuple[Any, int]]

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _varint(n: int, low: int, high: int) -> bytes:
    if type(n) is not int or not low <= n <= high:  # bool is not an Avro int
        raise ValueError(f"{n!r} is not an Avro {'int' if high == _INT_MAX else 'long'}")
    n = (n << 1) ^ (n >> 63)
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _put_long(n: Any) -> bytes:
    return _varint(n, _LONG_MIN, _LONG_MAX)


def _put_int(n: Any) -> bytes:
    return _varint(n, _INT_MIN, _INT_MAX)


def _put_string(s: Any) -> bytes:
    if not isinstance(s, str):
        raise ValueError(f"{type(s).__name__} is not an Avro string")
    raw = s.encode("utf-8")
    return _varint(len(raw), 0, _LONG_MAX) + raw


def _put_boolean(b: Any) -> bytes:
    if b is True:
        return b"\x01"
    if b is False:
        return b"\x00"
    raise ValueError(f"{b!r} is not an Avro boolean")


def _get_varint(data: bytes, pos: int, bits: int) -> tuple[int, int]:
    b = data[pos]
    pos += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift >= bits:
            raise ValueError(f"a varint longer than {bits} bits")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


def _get_long(data: bytes, pos: int) -> tuple[int, int]:
    return _get_varint(data, pos, 64)


def _get_int(data: bytes, pos: int) -> tuple[int, int]:
    n, pos = _get_varint(data, pos, 35)
    if not _INT_MIN <= n <= _INT_MAX:
        raise ValueError(f"{n} is past an Avro int")
    return n, pos


def _get_string(data: bytes, pos: int) -> tuple[str, int]:
    size, pos = _get_varint(data, pos, 64)
    end = pos + size
    if size < 0:
        raise ValueError(f"a string of {size} bytes")
    if end > len(data):
        raise ValueError(f"a string of {size} bytes at byte {pos}, past the end ({len(data)} bytes)")
    return data[pos:end].decode("utf-8"), end


def _get_boolean(data: bytes, pos: int) -> tuple[bool, int]:
    b = data[pos]
    if b > 1:
        raise ValueError(f"boolean byte {b}")
    return b == 1, pos + 1


_PRIMITIVES: dict[str, tuple[_Put, _Get]] = {
    "long": (_put_long, _get_long), "int": (_put_int, _get_int), "string": (_put_string, _get_string),
    "boolean": (_put_boolean, _get_boolean),
}


def _enum(schema: Mapping[str, Any]) -> tuple[_Put, _Get]:
    symbols = list(schema["symbols"])
    index = {s: _varint(i, 0, _INT_MAX) for i, s in enumerate(symbols)}

    def put(symbol: Any) -> bytes:
        try:
            return index[symbol]
        except (KeyError, TypeError):
            raise ValueError(f"{symbol!r} is not a symbol of {schema['name']}") from None

    def get(data: bytes, pos: int) -> tuple[str, int]:
        i, pos = _get_varint(data, pos, 35)
        if not 0 <= i < len(symbols):
            raise ValueError(f"symbol {i} of {schema['name']}'s {len(symbols)}")
        return symbols[i], pos
    return put, get


def _nullable(branches: list[Any]) -> tuple[_Put, _Get] | None:
    """A union of null and one flat type, in either order."""
    if len(branches) != 2 or "null" not in branches:
        return None
    null_at = branches.index("null")
    other = _field(branches[1 - null_at])
    if other is None:
        return None
    put_value, get_value = other
    null_tag, value_tag = bytes((null_at * 2,)), bytes(((1 - null_at) * 2,))  # zigzag of 0 and 1

    def put(value: Any) -> bytes:
        return null_tag if value is None else value_tag + put_value(value)

    def get(data: bytes, pos: int) -> tuple[Any, int]:
        branch, pos = _get_varint(data, pos, 35)
        if branch == null_at:
            return None, pos
        if branch != 1 - null_at:
            raise ValueError(f"union branch {branch} of 2")
        return get_value(data, pos)
    return put, get


def _field(schema: Any) -> tuple[_Put, _Get] | None:
    if isinstance(schema, str):
        return _PRIMITIVES.get(schema)
    if isinstance(schema, list):
        return _nullable(schema)
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "enum":
            return _enum(schema)
        if isinstance(kind, str) and set(schema) == {"type"}:  # {"type": "long"}, no logical type
            return _PRIMITIVES.get(kind)
    return None


def _fields(schema: object) -> list[tuple[str, Any, _Put, _Get]] | None:
    """(name, its default, put, get) of each field, or None outside the subset."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    out = []
    for f in schema["fields"]:
        codec = _field(f["type"])
        if codec is None:
            return None
        out.append((f["name"], f.get("default"), *codec))
    return out


def writer_for(schema: object) -> Writer | None:
    """The record's Avro body from a mapping of its fields (a field left out is its default,
    as fastavro writes it), or None for a schema outside the subset."""
    fields = _fields(schema)
    if fields is None:
        return None
    puts = [(name, default, put) for name, default, put, _ in fields]

    def write(record: Mapping[str, Any]) -> bytes:
        get = record.get
        return b"".join([put(get(name, default)) for name, default, put in puts])
    return write


def reader_for(schema: object) -> Reader | None:
    """The record read from ``data`` at ``pos``, and the position after it; ValueError or
    IndexError for bytes that are not one. None for a schema outside the subset."""
    fields = _fields(schema)
    if fields is None:
        return None
    gets = [(name, get) for name, _, _, get in fields]

    def read(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        record: dict[str, Any] = {}
        for name, get in gets:
            record[name], pos = get(data, pos)
        return record, pos
    return read
