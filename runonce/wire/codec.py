"""Avro single-object encoding of runonce's records, with fastavro.

Wire format (Avro spec, "Single-object encoding")::

    C3 01 | 8-byte little-endian CRC-64-AVRO fingerprint of the parsing canonical form | Avro binary body

so a record names its schema without a registry. Flat records (fields of primitives, enums
and nullable primitives: an action, a result, a verdict) are read and written by flat.py,
in plain Python, which is faster for them than fastavro's per-call setup and union matching;
fastavro does the rest (a decision, which holds its request) and the schemas' parsing and
resolution of earlier versions (the avro package is ~11x slower again; it is only used by
the schema compatibility test).

This module is the one seam where the encoders' exceptions are translated.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any, Mapping

import fastavro
from fastavro.schema import to_parsing_canonical_form

import runonce.schemas as schemas
from runonce.errors import DecodeError, UnknownSchema
from runonce.wire import flat

MAGIC = b"\xc3\x01"
HEADER_LEN = 10

_EMPTY = 0xC15D213AA4D7A795


def _crc64_table() -> list[int]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY & -(fp & 1))
        table.append(fp)
    return table


_TABLE = _crc64_table()


def crc64_avro(data: bytes) -> int:
    """The Rabin CRC-64-AVRO fingerprint the spec defines for single-object encoding."""
    fp = _EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp


@dataclass(frozen=True, slots=True)
class RecordType:
    name: str  # full name, e.g. dev.runonce.v1.ActionRequested
    parsed: Any  # fastavro parsed schema (the writer's)
    fingerprint: bytes  # 8 bytes, little-endian
    #: the body of a record as the current schema reads it (a previous version's: resolved to the current)
    read: flat.Reader
    #: the body of a record (the current schema's)
    write: flat.Writer
    #: a current record whose first field is a record: its other fields' body (``encode_after``)
    write_tail: flat.Writer | None = None

    @property
    def header(self) -> bytes:
        return MAGIC + self.fingerprint


def _fastavro_writer(parsed: Any) -> flat.Writer:
    def write(record: Mapping[str, Any]) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        return buf.getvalue()
    return write


def _fastavro_reader(parsed: Any, reader_schema: Any = None) -> flat.Reader:
    def read(data: bytes, pos: int) -> tuple[dict[str, Any], int]:
        body = io.BytesIO(data[pos:])
        record = fastavro.schemaless_reader(body, parsed, reader_schema)
        if not isinstance(record, dict):
            raise ValueError("the body did not decode to a record")
        return record, pos + body.tell()
    return read


def _tail_writer(raw: dict[str, Any], known: dict[str, Any]) -> flat.Writer | None:
    """A record's fields after its first, when the first is a record (a named type, given by
    name): what ``Codec.encode_after`` writes behind the first's bytes."""
    fields = raw["fields"]
    if not fields or not isinstance(fields[0]["type"], str) or fields[0]["type"] not in known:
        return None
    tail = fastavro.parse_schema({"type": "record", "name": f"{raw['name']}AfterFirst", "namespace": raw["namespace"],
                                  "fields": fields[1:]}, named_schemas=dict(known))
    return flat.writer_for(tail) or _fastavro_writer(tail)


class Codec:
    """Encodes and decodes the contract's records. Build one and share it."""

    def __init__(self) -> None:
        named: dict[str, Any] = {}
        self._by_name: dict[str, RecordType] = {}
        self._by_fingerprint: dict[bytes, RecordType] = {}
        for filename in schemas.SCHEMA_FILES:
            raw = schemas.load_raw(filename)
            known = dict(named)  # the named types before this schema's own
            parsed = fastavro.parse_schema(raw, named_schemas=named)
            canonical = to_parsing_canonical_form(parsed)
            fingerprint = struct.pack("<Q", crc64_avro(canonical.encode("utf-8")))
            name = f"{raw['namespace']}.{raw['name']}"
            rt = RecordType(name, parsed, fingerprint, flat.reader_for(parsed) or _fastavro_reader(parsed),
                            flat.writer_for(parsed) or _fastavro_writer(parsed), _tail_writer(raw, known))
            self._by_name[raw["name"]] = rt
            self._by_fingerprint[fingerprint] = rt
        # Records written with a previous version of a schema (schemas/history/, each kept
        # backward compatible by tests/unit/test_schema_compat.py) are read as the current one.
        for version, files in schemas.history_versions().items():
            named_old: dict[str, Any] = {}
            for filename in files:
                raw = schemas.load_raw(filename, "history")
                parsed = fastavro.parse_schema(raw, named_schemas=named_old)
                fingerprint = struct.pack("<Q", crc64_avro(to_parsing_canonical_form(parsed).encode("utf-8")))
                if fingerprint not in self._by_fingerprint:
                    current = self._by_name[raw["name"]]
                    self._by_fingerprint[fingerprint] = RecordType(
                        current.name, parsed, fingerprint, _fastavro_reader(parsed, current.parsed), current.write)

    def body_of(self, data: bytes, short_name: str) -> bytes | None:
        """The Avro body of ``data``, a ``short_name`` record that ``decode`` read, when it was
        written with the current schema (its body is then the encoding of what it decoded to:
        ``decode`` refuses trailing bytes); None for a record of an earlier version."""
        rt = self._by_name[short_name]
        return data[HEADER_LEN:] if data[2:HEADER_LEN] == rt.fingerprint else None

    def encode_after(self, short_name: str, first: bytes, record: dict[str, Any]) -> bytes:
        """``encode(short_name, record)`` with its first field given encoded (``first``, from
        ``body_of``): a decision holds its request as it arrived, and encoding it again was a
        sixth of what a decision cost (bench/decision_cost.py)."""
        rt = self._by_name[short_name]
        if rt.write_tail is None:
            raise ValueError(f"{short_name}'s first field is not a record")
        try:
            return rt.header + first + rt.write_tail(record)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"cannot encode {short_name}: {exc}") from exc

    def record_type(self, short_name: str) -> RecordType:
        return self._by_name[short_name]

    def encode(self, short_name: str, record: dict[str, Any]) -> bytes:
        rt = self._by_name[short_name]
        try:
            return rt.header + rt.write(record)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"cannot encode {short_name}: {exc}") from exc

    def decode(self, data: bytes | None, expect: str | None = None) -> tuple[str, dict[str, Any]]:
        """Return (short record name, record). Raises DecodeError naming the problem."""
        if data is None:
            raise DecodeError("record value is null (a tombstone is not an action)")
        if len(data) < HEADER_LEN or data[:2] != MAGIC:
            raise DecodeError(
                f"not Avro single-object encoded: expected magic C3 01, got {data[:2].hex(' ').upper() or 'nothing'}"
                f" ({len(data)} bytes)"
            )
        fingerprint = bytes(data[2:HEADER_LEN])
        rt = self._by_fingerprint.get(fingerprint)
        if rt is None:
            raise UnknownSchema(f"unknown schema fingerprint {fingerprint.hex()} (known: "
                                f"{', '.join(f'{r.name}={fp.hex()}' for fp, r in self._by_fingerprint.items())})")
        short = rt.name.rsplit(".", 1)[1]
        if expect is not None and short != expect:
            raise DecodeError(f"expected a {expect} record, got {short}")
        try:
            record, end = rt.read(data, HEADER_LEN)
        except Exception as exc:  # EOFError, ValueError, UnicodeDecodeError, IndexError...
            raise DecodeError(f"corrupt {short} body: {type(exc).__name__}: {exc}") from exc
        if end != len(data):  # not one Avro object: whose bytes are they? (and body_of hands bodies on whole)
            raise DecodeError(f"{short} body is followed by {len(data) - end} bytes that are not part of it")
        return short, record
