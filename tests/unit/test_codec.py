from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runonce.errors import DecodeError, UnknownSchema
from runonce.sdk.submit import build_request
from runonce.wire.codec import MAGIC, Codec, crc64_avro


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec()


def test_crc64_avro_matches_the_spec_vector() -> None:
    # The Avro spec's test vector: the fingerprint of the schema "null".
    assert crc64_avro(b'"null"') == 7195948357588979594


def test_action_round_trips_with_single_object_header(codec: Codec) -> None:
    record = build_request("send_email", {"to": "a@b.c", "n": 1}, agent_id="a1", idempotency_key="k")
    data = codec.encode("ActionRequested", record)
    assert data[:2] == MAGIC
    assert data[2:10] == codec.record_type("ActionRequested").fingerprint
    assert codec.decode(data) == ("ActionRequested", record)


def test_decision_embeds_the_request(codec: Codec) -> None:
    request = build_request("t", {}, agent_id="a")
    decision = {"request": request, "outcome": "DROPPED", "reason": "duplicate_key", "dedup_key": "k",
                "unkeyed": False, "content_hash": "h", "matched_key": "k", "first_action_id": "x",
                "first_partition": 1, "first_offset": 7, "window_ms": 10, "event_time_ms": 5,
                "source_partition": 2, "source_offset": 3}
    assert codec.decode(codec.encode("ActionDecision", decision)) == ("ActionDecision", decision | {
        "hold_why": None, "hold_expires_at_ms": None, "hold_partition": None, "verdict_by": None, "verdict_id": None,
        "natural_id": None})


def test_a_record_written_with_a_previous_schema_is_read_as_the_current_one(codec: Codec) -> None:
    # A decision written before holds existed (schemas/history/action_decision.v1.avsc) still
    # decodes, with the fields added since at their defaults: an upgraded reader reads old topics.
    import io

    import fastavro
    from fastavro.schema import to_parsing_canonical_form

    from runonce import schemas
    named: dict = {}
    fastavro.parse_schema(schemas.load_raw("action_requested.v1.avsc", "history"), named_schemas=named)
    v1 = fastavro.parse_schema(schemas.load_raw("action_decision.v1.avsc", "history"), named_schemas=named)
    fingerprint = struct.pack("<Q", crc64_avro(to_parsing_canonical_form(v1).encode()))
    assert fingerprint != codec.record_type("ActionDecision").fingerprint
    old = {"request": build_request("t", {}, agent_id="a"), "outcome": "APPROVED", "reason": "unique",
           "dedup_key": "k", "unkeyed": False, "content_hash": "h", "matched_key": None, "first_action_id": None,
           "first_partition": None, "first_offset": None, "window_ms": None, "event_time_ms": 5,
           "source_partition": 2, "source_offset": 3}
    body = io.BytesIO()
    fastavro.schemaless_writer(body, v1, old)
    name, record = codec.decode(MAGIC + fingerprint + body.getvalue())
    assert name == "ActionDecision"
    assert record == old | {"hold_why": None, "hold_expires_at_ms": None, "hold_partition": None,
                            "verdict_by": None, "verdict_id": None, "natural_id": None}


def test_each_schema_has_its_own_fingerprint(codec: Codec) -> None:
    prints = {codec.record_type(n).fingerprint for n in ("ActionRequested", "ActionDecision", "ActionResult")}
    assert len(prints) == 3


@pytest.mark.parametrize("data, message", [
    (b"not avro at all", "expected magic C3 01, got 6E 6F"),
    (b"\xc3\x01\x00", "not Avro single-object encoded"),
    (b"", "got nothing"),
    (None, "record value is null"),
])
def test_not_single_object_encoded_is_named(codec: Codec, data: bytes | None, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        codec.decode(data)


def test_unknown_fingerprint_is_named(codec: Codec) -> None:
    data = MAGIC + struct.pack("<Q", 12345) + b"\x00"
    with pytest.raises(UnknownSchema, match="unknown schema fingerprint 3930000000000000"):
        codec.decode(data)


def test_truncated_body_is_a_decode_error(codec: Codec) -> None:
    data = codec.encode("ActionRequested", build_request("send_email", {"x": "y" * 50}, agent_id="a"))
    with pytest.raises(DecodeError, match="corrupt ActionRequested body"):
        codec.decode(data[:30])


def test_wrong_record_type_is_named(codec: Codec) -> None:
    data = codec.encode("ActionRequested", build_request("t", {}, agent_id="a"))
    with pytest.raises(DecodeError, match="expected a ActionDecision record, got ActionRequested"):
        codec.decode(data, expect="ActionDecision")


_ids = st.text(st.characters(codec="utf-8"), max_size=20)


@settings(max_examples=200, deadline=None)
@given(tool=_ids, params=st.dictionaries(_ids, st.one_of(st.integers(), _ids), max_size=3),
       key=st.none() | _ids.filter(bool), outcome=st.sampled_from(["APPROVED", "DROPPED", "PASSED", "HELD"]),
       numbers=st.lists(st.none() | st.integers(0, 2**31 - 1), min_size=4, max_size=4), natural_id=st.none() | _ids)
def test_a_decision_written_behind_its_requests_bytes_is_the_decision_encoded_whole(
        tool: str, params: dict[str, Any], key: str | None, outcome: str, numbers: list[int | None],
        natural_id: str | None) -> None:
    codec = Codec()
    request = build_request(tool, params, agent_id="a", idempotency_key=key)
    body = codec.body_of(codec.encode("ActionRequested", request), "ActionRequested")
    assert body is not None
    decision = {"request": request, "outcome": outcome, "reason": "unique", "dedup_key": key or "", "unkeyed": not key,
                "content_hash": "h", "matched_key": natural_id, "first_action_id": natural_id,
                "first_partition": numbers[0], "first_offset": numbers[1], "window_ms": numbers[2],
                "event_time_ms": 5, "source_partition": 2, "source_offset": 3, "hold_expires_at_ms": numbers[3],
                "natural_id": natural_id}
    assert codec.encode_after("ActionDecision", body, decision) == codec.encode("ActionDecision", decision)


def test_bytes_after_the_body_are_refused(codec: Codec) -> None:
    data = codec.encode("ActionRequested", build_request("t", {}, agent_id="a"))
    with pytest.raises(DecodeError, match="ActionRequested body is followed by 2 bytes that are not part of it"):
        codec.decode(data + b"\x00\x02")


def test_a_request_of_an_earlier_version_has_no_body_to_reuse(codec: Codec) -> None:
    # its body encodes the v1 fields only: a decision embedding it must encode the request whole
    data = v1_request(codec, build_request("t", {}, agent_id="a"))
    assert codec.decode(data)[0] == "ActionRequested"
    assert codec.body_of(data, "ActionRequested") is None
    current = codec.encode("ActionRequested", build_request("t", {}, agent_id="a"))
    assert codec.body_of(current, "ActionRequested") == current[10:]


def v1_request(codec: Codec, request: dict[str, Any]) -> bytes:
    """``request`` as a client of schemas/history/action_requested.v1.avsc wrote it."""
    import io

    import fastavro
    from fastavro.schema import to_parsing_canonical_form

    from runonce import schemas
    v1 = fastavro.parse_schema(schemas.load_raw("action_requested.v1.avsc", "history"), named_schemas={})
    body = io.BytesIO()
    fastavro.schemaless_writer(body, v1, request)
    return MAGIC + struct.pack("<Q", crc64_avro(to_parsing_canonical_form(v1).encode())) + body.getvalue()
