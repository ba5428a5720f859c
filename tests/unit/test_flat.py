"""flat.py against fastavro: every flat schema runonce has, written byte for byte as fastavro
writes it and read as fastavro reads it; bytes that are not such a record are refused."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runonce.errors import DecodeError
from runonce.wire import flat
from runonce.wire.codec import HEADER_LEN, Codec

CODEC = Codec()
FLAT = {name: CODEC.record_type(name) for name in ("ActionRequested", "ActionResult", "ApprovalVerdict",
                                                   "ActionCancel")}


def _values(schema: Any) -> st.SearchStrategy[Any]:
    if isinstance(schema, list):
        return st.one_of(*[_values(branch) for branch in schema])
    if isinstance(schema, dict):
        if schema["type"] == "enum":
            return st.sampled_from(schema["symbols"])
        return _values(schema["type"])
    return {"null": st.none(), "boolean": st.booleans(), "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1), "string": st.text()}[schema]


def _records(parsed: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({f["name"]: _values(f["type"]) for f in parsed["fields"]})


def test_these_schemas_are_flat_and_a_decision_is_not() -> None:
    for name, rt in FLAT.items():
        assert flat.writer_for(rt.parsed) is not None and flat.reader_for(rt.parsed) is not None, name
    assert flat.writer_for(CODEC.record_type("ActionDecision").parsed) is None


@pytest.mark.parametrize("name", FLAT)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_flat_record_is_written_and_read_as_fastavro_does(name: str, data: st.DataObject) -> None:
    rt = FLAT[name]
    record = data.draw(_records(rt.parsed))
    expected = io.BytesIO()
    fastavro.schemaless_writer(expected, rt.parsed, record)
    body = flat.writer_for(rt.parsed)(record)  # type: ignore[misc]  # flat, as the test above says
    assert body == expected.getvalue()
    assert CODEC.encode(name, record) == rt.header + body
    read = flat.reader_for(rt.parsed)
    assert read is not None
    assert read(b"xx" + body, 2) == (fastavro.schemaless_reader(io.BytesIO(body), rt.parsed), 2 + len(body))
    assert CODEC.decode(rt.header + body) == (name, record)


@pytest.mark.parametrize("name", FLAT)
@settings(max_examples=300, deadline=None)
@given(junk=st.binary(max_size=60))
def test_what_flat_reads_from_any_bytes_fastavro_reads_the_same(name: str, junk: bytes) -> None:
    """Any bytes: flat refuses them (it is stricter: an overlong varint, a boolean byte past 1),
    or reads what fastavro reads, ending where it ends."""
    rt = FLAT[name]
    read = flat.reader_for(rt.parsed)
    assert read is not None
    try:
        record, end = read(junk, 0)
    except (ValueError, IndexError):
        return
    body = io.BytesIO(junk)
    assert fastavro.schemaless_reader(body, rt.parsed) == record
    assert body.tell() == end


@pytest.mark.parametrize("body, problem", [
    (b"", "IndexError"),
    (b"\x02", "ValueError: a string of 1 bytes at byte 11, past the end"),  # action_id: 1 byte, then nothing
    (b"\x7f", "ValueError: a string of -64 bytes"),     # a negative length
    (b"\x80" * 11, "ValueError: a varint longer than 64 bits"),
    (b"\x04\xff\xfe", "UnicodeDecodeError"),
])
def test_a_corrupt_flat_body_is_named(body: bytes, problem: str) -> None:
    with pytest.raises(DecodeError, match=f"corrupt ActionRequested body: {problem}"):
        CODEC.decode(FLAT["ActionRequested"].header + body)
    assert len(FLAT["ActionRequested"].header) == HEADER_LEN


def test_a_field_left_out_is_written_as_its_default() -> None:
    rt = FLAT["ActionRequested"]
    record = {"action_id": "a", "agent_id": "b", "tool": "t", "params_json": "{}", "requested_at_ms": 1}
    expected = io.BytesIO()
    fastavro.schemaless_writer(expected, rt.parsed, record)
    assert CODEC.encode("ActionRequested", record) == rt.header + expected.getvalue()
    with pytest.raises(ValueError, match="cannot encode ActionRequested"):
        CODEC.encode("ActionRequested", {k: v for k, v in record.items() if k != "requested_at_ms"})
